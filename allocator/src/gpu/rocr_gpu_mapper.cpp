#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"

#include <cstdio>
#include <memory>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_handles.hpp"

namespace umem::alloc {
namespace {

namespace rc = hsa::rocr_compat;
using hsa::rocr_agent;
using hsa::rocr_pool;
using hsa::rocr_status;

struct runtime_agent {
  rocr_agent handle;
  std::uint32_t device = 0;
  std::uint32_t kfd_node = 0;
};

template <class Handle>
rocr_status collect(Handle h, void* out) {
  static_cast<std::vector<Handle>*>(out)->push_back(h);
  return rc::status::success;
}

std::vector<runtime_agent> enumerate_agents(const hsa::rocr_library& lib) {
  std::vector<runtime_agent> out;
  for (rocr_agent h : hsa::agents_of(lib)) {
    runtime_agent a{h};
    lib.check(lib.fn().hsa_agent_get_info(h, rc::agent_info::device, &a.device),
              "hsa_agent_get_info(DEVICE)");
    lib.check(lib.fn().hsa_agent_get_info(h, rc::agent_info::driver_node_id, &a.kfd_node),
              "hsa_agent_get_info(DRIVER_NODE_ID)");
    out.push_back(a);
  }
  return out;
}

// The CPU agent's GLOBAL pools of each coherence (docs/rocm-runtime.md §2: FINE, EXTENDED FINE,
// KERNARG+FINE and COARSE on MI300A); the first of each kind in enumeration order.
void find_pools(const hsa::rocr_library& lib, rocr_agent agent, std::optional<rocr_pool>& fine,
                std::optional<rocr_pool>& coarse, std::optional<rocr_pool>& extended_fine) {
  for (rocr_pool p : hsa::pools_of(lib, agent)) {
    std::uint32_t segment = 0, flags = 0;
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::segment, &segment),
              "hsa_amd_memory_pool_get_info(SEGMENT)");
    if (segment != static_cast<std::uint32_t>(pool_segment::global)) continue;
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::global_flags, &flags),
              "hsa_amd_memory_pool_get_info(GLOBAL_FLAGS)");
    if (!fine && (flags & pool_flag::fine_grained) != 0 && (flags & pool_flag::kernarg_init) == 0)
      fine = p;
    if (!coarse && (flags & pool_flag::coarse_grained) != 0) coarse = p;
    if (!extended_fine && (flags & pool_flag::extended_scope_fine_grained) != 0)
      extended_fine = p;
  }
}

std::string nodes_text(const std::vector<int>& nodes) {
  std::string out;
  for (int n : nodes) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

std::string segment_text(const segment& s) {
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", s.base);
  return std::to_string(s.size) + " bytes at " + addr + " on NUMA node " +
         nodes_text(s.binding.nodes);
}

const char* kind_text(coherence k) {
  switch (k) {
    case coherence::fine: return "FINE_GRAINED";
    case coherence::coarse: return "COARSE_GRAINED";
    case coherence::extended_fine: return "EXTENDED_SCOPE_FINE_GRAINED";
    case coherence::unknown: break;
  }
  return "unknown";
}

}  // namespace

rocr_gpu_mapper::rocr_gpu_mapper(const umem::topology& topo, const hsa::rocr_library& lib)
    : lib_(lib), session_(std::make_unique<hsa::rocr_session>(lib)), mode_(gpu_map_mode::lock) {
  const auto xnack = topo.xnack_enabled();
  if (xnack == true) mode_ = gpu_map_mode::svm;
  mode_reason_ = !xnack ? "XNACK state unknown, so locking (safe either way)"
                 : *xnack ? "XNACK on"
                          : "XNACK off";

  std::map<std::uint32_t, rocr_agent> cpus, gpus;
  for (const auto& a : enumerate_agents(lib)) {
    if (a.device == rc::device_type::cpu) cpus[a.kfd_node] = a.handle;
    if (a.device == rc::device_type::gpu) gpus[a.kfd_node] = a.handle;
  }

  // NUMA node -> the CPU agent serving it: KFD CPU node i is the i-th NUMA node with CPUs.
  const auto add_cpu = [&](int os_index, std::uint32_t kfd) {
    node_agents& n = nodes_[os_index];
    const auto it = cpus.find(kfd);
    if (it == cpus.end()) return;
    cpu_agent_pools c{kfd, it->second, {}, {}, {}};
    find_pools(lib, c.agent, c.fine, c.coarse, c.extended_fine);
    if (!c.extended_fine && c.fine) {
      extended_fine_fallback_ = true;
      log().info("rocr_gpu_mapper: CPU agent (KFD node {}) has no EXTENDED_SCOPE_FINE_GRAINED "
                 "pool (older ROCr); extended_fine segments on NUMA node {} lock to its "
                 "FINE_GRAINED pool",
                 kfd, os_index);
    }
    n.cpu = c;
  };
  if (topo.numa.nodes.empty()) {
    for (const auto& [kfd, handle] : cpus) add_cpu(static_cast<int>(kfd), kfd);
  } else {
    std::uint32_t kfd_cpu = 0;
    for (const auto& n : topo.numa.nodes) {
      if (n.cpus.empty())
        nodes_[n.os_index];  // a CPU-less node: known, without a CPU agent
      else
        add_cpu(n.os_index, kfd_cpu++);
    }
  }

  if (!topo.gpus().empty() && topo.gpu_numa.empty())
    throw_error(errc::invalid_argument,
                "rocr_gpu_mapper: the topology has " + std::to_string(topo.gpus().size()) +
                    " GPU agents but no GPU->NUMA bindings; fill topology::gpu_numa with "
                    "umem::numa::map_gpus_to_numa");
  for (const auto& b : topo.gpu_numa) {
    const auto it = gpus.find(b.gpu_kfd_node);
    if (it == gpus.end())
      throw_error(errc::invalid_argument,
                  "rocr_gpu_mapper: the topology binds GPU KFD node " +
                      std::to_string(b.gpu_kfd_node) + ", which ROCr (" + lib.resolved_path() +
                      ") does not enumerate; the topology was not discovered from this runtime");
    if (!b.numa_node) {
      log().warn("rocr_gpu_mapper: GPU KFD node {} has no NUMA node ({}: {}); it is never "
                 "granted access",
                 b.gpu_kfd_node, b.method, b.evidence);
      continue;
    }
    nodes_[*b.numa_node].gpus.push_back(it->second);
  }
  log().debug("rocr_gpu_mapper: {}", describe());
}

rocr_gpu_mapper::~rocr_gpu_mapper() {
  if (creator_.is_other()) (void)session_.release();  // Note [Fork]: leaked, not shut down
}

std::vector<rocr_agent> rocr_gpu_mapper::gpus_for(const segment& s) const {
  if (s.base == nullptr || s.size == 0 || s.binding.nodes.empty())
    throw_error(errc::invalid_argument,
                "rocr_gpu_mapper: a segment needs a base, a size and at least one node (got " +
                    segment_text(s) + ")");
  std::vector<rocr_agent> out;
  for (int node : s.binding.nodes) {
    const auto it = nodes_.find(node);
    if (it == nodes_.end()) {
      std::vector<int> known;
      for (const auto& [n, agents] : nodes_) known.push_back(n);
      throw_error(errc::invalid_argument, "rocr_gpu_mapper: NUMA node " + std::to_string(node) +
                                              " is not in the topology (nodes: " +
                                              nodes_text(known) + ")");
    }
    out.insert(out.end(), it->second.gpus.begin(), it->second.gpus.end());
  }
  if (out.empty())
    throw_error(errc::unsupported,
                "rocr_gpu_mapper: no GPU agent is local to NUMA node " +
                    nodes_text(s.binding.nodes) +
                    " (topology::gpu_numa), so " + segment_text(s) +
                    " cannot be made GPU-accessible; place GPU-visible memory on a GPU's node "
                    "(node:N or device:D)");
  return out;
}

rocr_pool rocr_gpu_mapper::pool_for(const segment& s) const {
  const int node = s.binding.nodes.front();
  const auto& cpu = nodes_.at(node).cpu;
  if (!cpu)
    throw_error(errc::unsupported, "rocr_gpu_mapper: NUMA node " + std::to_string(node) +
                                       " has no CPU agent in ROCr (a CPU-less node), so there is "
                                       "no pool to lock " + segment_text(s) + " to");
  std::optional<rocr_pool> pool;
  switch (s.kind) {
    case coherence::fine: pool = cpu->fine; break;
    case coherence::coarse: pool = cpu->coarse; break;
    case coherence::extended_fine:
      pool = cpu->extended_fine ? cpu->extended_fine : cpu->fine;
      break;
    case coherence::unknown:
      throw_error(errc::invalid_argument,
                  "rocr_gpu_mapper: segment kind must be fine, coarse or extended_fine");
  }
  if (!pool)
    throw_error(errc::unsupported, "rocr_gpu_mapper: the CPU agent of NUMA node " +
                                       std::to_string(node) + " (KFD node " +
                                       std::to_string(cpu->kfd_node) + ") has no GLOBAL " +
                                       kind_text(s.kind) + " pool");
  return *pool;
}

void rocr_gpu_mapper::check(rocr_status status, const char* call, const segment& s,
                            bool releasing) const {
  try {
    lib_.check(status, call);
  } catch (const umem::error& e) {
    throw_error(e.code(), "rocr_gpu_mapper: cannot " +
                              std::string(releasing ? "release " : "make ") + segment_text(s) +
                              (releasing ? " from the GPU: " : " GPU-accessible: ") + e.what());
  }
}

void rocr_gpu_mapper::map_svm(const segment& s, const std::vector<rocr_agent>& gpus) const {
  // No extended-scope SVM model exists: extended_fine gets FINE_GRAINED (Note [SVM mode ...]).
  std::vector<hsa::rocr_svm_attribute> attrs{
      {rc::svm_attrib::global_flag, s.kind == coherence::coarse ? rc::svm_model::coarse_grained
                                                                : rc::svm_model::fine_grained}};
  for (rocr_agent g : gpus) attrs.push_back({rc::svm_attrib::agent_accessible_in_place, g.handle});
  check(lib_.fn().hsa_amd_svm_attributes_set(s.base, s.size, attrs.data(), attrs.size()),
        "hsa_amd_svm_attributes_set", s, false);
}

void rocr_gpu_mapper::map_lock(const segment& s, const std::vector<rocr_agent>& gpus) const {
  const rocr_pool pool = pool_for(s);
  std::vector<rocr_agent> agents = gpus;  // the call takes a non-const array
  void* agent_ptr = nullptr;
  check(lib_.fn().hsa_amd_memory_lock_to_pool(s.base, s.size, agents.data(),
                                              static_cast<int>(agents.size()), pool, 0,
                                              &agent_ptr),
        "hsa_amd_memory_lock_to_pool", s, false);
  if (agent_ptr == s.base) return;
  const rocr_status undo = lib_.fn().hsa_amd_memory_unlock(s.base);
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", agent_ptr);
  throw_error(errc::unsupported,
              "rocr_gpu_mapper: ROCr locked " + segment_text(s) + " at GPU address " + addr +
                  ", not at its host address; zero-copy sharing needs one address for CPU and "
                  "GPU (an APU gives that; this runtime or device does not). The lock was " +
                  (undo == rc::status::success ? std::string("undone.")
                                               : "not undone: " + lib_.status_text(undo)));
}

void rocr_gpu_mapper::map(const segment& s) {
  if (creator_.is_other()) return;  // Note [Fork]: host memory only in a forked child
  const auto gpus = gpus_for(s);
  if (mode_ == gpu_map_mode::svm)
    map_svm(s, gpus);
  else
    map_lock(s, gpus);
}

void rocr_gpu_mapper::unmap(const segment& s) noexcept {
  if (creator_.is_other()) return;  // the child never locked its copies of these pages
  try {
    if (mode_ == gpu_map_mode::lock) {
      check(lib_.fn().hsa_amd_memory_unlock(s.base), "hsa_amd_memory_unlock", s, true);
      return;
    }
    std::vector<hsa::rocr_svm_attribute> attrs;
    for (rocr_agent g : gpus_for(s)) attrs.push_back({rc::svm_attrib::agent_no_access, g.handle});
    check(lib_.fn().hsa_amd_svm_attributes_set(s.base, s.size, attrs.data(), attrs.size()),
          "hsa_amd_svm_attributes_set", s, true);
  } catch (const std::exception& e) {
    log().error("rocr_gpu_mapper::unmap: {}", e.what());
  }
}

std::string rocr_gpu_mapper::describe() const {
  if (creator_.is_other())
    return "a forked child of the process that opened ROCr (" + lib_.resolved_path() +
           "): segments are host memory only, KFD serves only its opener";
  if (mode_ == gpu_map_mode::svm)
    return mode_reason_ +
           ": segments are made accessible in place to their NUMA node's GPU agents through SVM "
           "attributes (ROCr " + lib_.resolved_path() + ")";
  return mode_reason_ +
         ": segments are locked to their NUMA node's CPU agent pool of the requested coherence "
         "and opened to that node's GPU agents" +
         (extended_fine_fallback_ ? " (no EXTENDED_SCOPE_FINE_GRAINED CPU pool: extended_fine "
                                    "uses FINE_GRAINED)"
                                  : "") +
         " (ROCr " + lib_.resolved_path() + ")";
}

}  // namespace umem::alloc
