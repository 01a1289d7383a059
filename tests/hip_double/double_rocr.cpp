// Attaching the HIP double to a ROCr (libhsa-runtime64, normally the ROCr double) and building
// HIP's devices from its agents and pools the way clr does (rocclr/device/rocm/rocdevice.cpp at
// ROCm/clr f9f995c6); the attach/detach controls.
#include "double_rocr.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "double_state.hpp"

namespace umem::hip_double {
namespace {

// Pool flags (HSA_REGION_GLOBAL_FLAG_*); EXTENDED_SCOPE_FINE_GRAINED is newer than Debian's 5.2.3
// headers.
constexpr std::uint32_t kFlagKernarg = 1, kFlagFine = 2, kFlagCoarse = 4, kFlagExtFine = 8;

template <class Fn>
void bind(void* handle, const char* name, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (out == nullptr && missing.empty()) missing = name;
}

std::string bind_all(void* h, rocr_functions& fn) {
  std::string missing;
  bind(h, "hsa_init", fn.init, missing);
  bind(h, "hsa_shut_down", fn.shut_down, missing);
  bind(h, "hsa_status_string", fn.status_string, missing);
  bind(h, "hsa_system_get_info", fn.system_get_info, missing);
  bind(h, "hsa_iterate_agents", fn.iterate_agents, missing);
  bind(h, "hsa_agent_get_info", fn.agent_get_info, missing);
  bind(h, "hsa_amd_agent_iterate_memory_pools", fn.iterate_memory_pools, missing);
  bind(h, "hsa_amd_memory_pool_get_info", fn.memory_pool_get_info, missing);
  bind(h, "hsa_amd_agent_memory_pool_get_info", fn.agent_memory_pool_get_info, missing);
  bind(h, "hsa_amd_memory_pool_allocate", fn.memory_pool_allocate, missing);
  bind(h, "hsa_amd_memory_pool_free", fn.memory_pool_free, missing);
  bind(h, "hsa_amd_agents_allow_access", fn.agents_allow_access, missing);
  bind(h, "hsa_amd_memory_lock_to_pool", fn.memory_lock_to_pool, missing);
  bind(h, "hsa_amd_memory_unlock", fn.memory_unlock, missing);
  bind(h, "hsa_amd_pointer_info", fn.pointer_info, missing);
  return missing;
}

// A CPU agent as clr keeps it (AgentInfo of rocdevice.hpp).
struct cpu_agent {
  hsa_agent_t agent{0};
  hsa_amd_memory_pool_t fine{0};
  hsa_amd_memory_pool_t coarse{0};
};

std::vector<hsa_amd_memory_pool_t> pools_of(const rocr_functions& fn, hsa_agent_t agent) {
  std::vector<hsa_amd_memory_pool_t> out;
  fn.iterate_memory_pools(
      agent,
      [](hsa_amd_memory_pool_t p, void* d) {
        static_cast<std::vector<hsa_amd_memory_pool_t>*>(d)->push_back(p);
        return HSA_STATUS_SUCCESS;
      },
      &out);
  return out;
}

// Whether `pool` is a GLOBAL pool, with its flags.
bool global_pool(const rocr_functions& fn, hsa_amd_memory_pool_t pool, std::uint32_t& flags) {
  hsa_amd_segment_t segment{};
  if (fn.memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      segment != HSA_AMD_SEGMENT_GLOBAL)
    return false;
  flags = 0;
  return fn.memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags) ==
         HSA_STATUS_SUCCESS;
}

// clr Device::iterateCpuMemoryPoolCallback: the extended-scope fine pool is set aside; the fine
// pool is the first fine one, replaced by a later fine one without KERNARG; a pool that is not
// fine is the coarse one.
cpu_agent cpu_pools(const rocr_functions& fn, hsa_agent_t agent) {
  cpu_agent c{agent, {0}, {0}};
  for (hsa_amd_memory_pool_t p : pools_of(fn, agent)) {
    std::uint32_t flags = 0;
    if (!global_pool(fn, p, flags) || (flags & kFlagExtFine) != 0) continue;
    if ((flags & kFlagFine) != 0) {
      if (c.fine.handle == 0 || (flags & kFlagKernarg) == 0) c.fine = p;
    } else {
      c.coarse = p;
    }
  }
  return c;
}

// clr Device::iterateGpuMemoryPoolCallback: gpuvm_segment_ is the last coarse GLOBAL pool, or,
// before one is seen, the first GLOBAL pool that is not extended-scope fine.
hsa_amd_memory_pool_t gpuvm_pool(const rocr_functions& fn, hsa_agent_t agent) {
  hsa_amd_memory_pool_t gpuvm{0};
  for (hsa_amd_memory_pool_t p : pools_of(fn, agent)) {
    std::uint32_t flags = 0;
    if (!global_pool(fn, p, flags) || (flags & kFlagExtFine) != 0) continue;
    if ((flags & kFlagFine) == 0 && (flags & kFlagCoarse) != 0) gpuvm = p;
    if (gpuvm.handle == 0) gpuvm = p;
  }
  return gpuvm;
}

// clr Device::findLinkInfo(pool) for kLinkDistance: NUM_LINK_HOPS, then the sum of LINK_INFO's
// numa_distance over the hops (0 hops: 0); false when ROCr does not answer.
bool link_distance(const rocr_functions& fn, hsa_agent_t gpu, hsa_amd_memory_pool_t pool,
                   std::uint32_t& distance) {
  if (pool.handle == 0) return false;
  std::int32_t hops = 0;
  if (fn.agent_memory_pool_get_info(gpu, pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS,
                                    &hops) != HSA_STATUS_SUCCESS ||
      hops < 0)
    return false;
  distance = 0;
  if (hops == 0) return true;
  std::vector<hsa_amd_memory_pool_link_info_t> links(static_cast<std::size_t>(hops));
  if (fn.agent_memory_pool_get_info(gpu, pool, HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO,
                                    links.data()) != HSA_STATUS_SUCCESS)
    return false;
  for (const auto& l : links) distance += l.numa_distance;
  return true;
}

// clr Device::setupCpuAgent: the CPU agent whose fine pool is nearest by link distance (the first
// of equals); CPU agent 0 when ROCr answers no distance. Its fine pool is SystemSegment(), which
// roc::Buffer::create locks a hipHostRegister range to (CL_MEM_SVM_ATOMICS is always set), and
// hostAlloc allocates hipHostMalloc's memory from.
std::size_t nearest_cpu(const rocr_functions& fn, hsa_agent_t gpu,
                        const std::vector<cpu_agent>& cpus) {
  std::uint32_t best = std::numeric_limits<std::int32_t>::max();
  std::size_t index = 0;
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    std::uint32_t d = 0;
    if (link_distance(fn, gpu, cpus[i].fine, d) && d < best) {
      best = d;
      index = i;
    }
  }
  return index;
}

std::string enumerate(attached_rocr& r) {
  const rocr_functions& fn = r.fn;
  std::vector<hsa_agent_t> agents;
  fn.iterate_agents(
      [](hsa_agent_t a, void* d) {
        static_cast<std::vector<hsa_agent_t>*>(d)->push_back(a);
        return HSA_STATUS_SUCCESS;
      },
      &agents);
  std::vector<cpu_agent> cpus;
  // clr Device::iterateAgentCallback: CPU agents with their pools, GPU agents in ROCr's order.
  for (hsa_agent_t a : agents) {
    hsa_device_type_t type = HSA_DEVICE_TYPE_DSP;
    if (fn.agent_get_info(a, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS)
      return "HSA_AGENT_INFO_DEVICE failed";
    if (type == HSA_DEVICE_TYPE_CPU) cpus.push_back(cpu_pools(fn, a));
    if (type == HSA_DEVICE_TYPE_GPU) r.gpu_agents.push_back(a);
  }
  if (r.gpu_agents.empty()) return "ROCr has no GPU agent (HIP answers hipErrorNoDevice)";
  if (cpus.empty() || cpus[0].fine.handle == 0) return "ROCr has no CPU agent with a fine pool";
  for (hsa_agent_t gpu : r.gpu_agents) {
    rocr_device d;
    d.agent = gpu;
    d.gpuvm = gpuvm_pool(fn, gpu);
    d.cpu_index = nearest_cpu(fn, gpu, cpus);
    d.system_fine = cpus[d.cpu_index].fine;
    d.system_coarse = cpus[d.cpu_index].coarse;
    if (d.gpuvm.handle == 0) return "a GPU agent has no GLOBAL pool";
    r.devices.push_back(d);
  }
  // clr Device::create: HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT into hmmCpuMemoryAccessible_;
  // a failed query leaves it false.
  bool accessible = false;
  if (fn.system_get_info(HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT, &accessible) ==
      HSA_STATUS_SUCCESS)
    r.hmm_cpu_memory_accessible = accessible;
  return {};
}

}  // namespace

std::string status_text(const attached_rocr& r, hsa_status_t st) {
  const char* text = nullptr;
  if (r.fn.status_string != nullptr && r.fn.status_string(st, &text) == HSA_STATUS_SUCCESS &&
      text != nullptr)
    return text;
  return "status " + std::to_string(static_cast<unsigned>(st));
}

std::string attach(attached_rocr& r, const char* path) {
  if (path == nullptr || *path == '\0') return "no ROCr library named";
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return std::string("cannot map ") + path + ": " + dlerror();
  attached_rocr next;
  next.handle = h;
  next.path = path;
  next.pid = static_cast<int>(getpid());
  if (std::string missing = bind_all(h, next.fn); !missing.empty()) {
    dlclose(h);
    return std::string(path) + " lacks " + missing;
  }
  if (const hsa_status_t st = next.fn.init(); st != HSA_STATUS_SUCCESS) {
    std::string why = "hsa_init of " + std::string(path) + " failed: " + status_text(next, st);
    dlclose(h);
    return why;
  }
  if (std::string why = enumerate(next); !why.empty()) {
    next.fn.shut_down();
    dlclose(h);
    return why;
  }
  r = std::move(next);
  return {};
}

void detach(attached_rocr& r) {
  if (!r.attached()) return;
  r.fn.shut_down();
  dlclose(r.handle);
  r = attached_rocr{};
}

std::uint32_t pointer_type(const attached_rocr& r, const void* p) {
  hsa_amd_pointer_info_t info{};
  info.size = sizeof info;
  if (r.fn.pointer_info(p, &info, nullptr, nullptr, nullptr) != HSA_STATUS_SUCCESS)
    return HSA_EXT_POINTER_TYPE_UNKNOWN;
  return static_cast<std::uint32_t>(info.type);
}

}  // namespace umem::hip_double

using namespace umem::hip_double;

// Test control: runs HIP over the ROCr at `path` (dlopen RTLD_NOW | RTLD_LOCAL: umem maps the
// ROCr double from the same path, so both see one state), hsa_init, one HIP device per GPU agent in
// ROCr's order. 0, or -1 with the reason in umem_hip_double_last_message(); -1 too when already
// attached. The device count becomes ROCr's; memory entry points work from now on.
UMEM_DOUBLE_EXPORT int umem_hip_double_attach_rocr(const char* path) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (s.rocr.attached()) {
    s.last_message = "already attached to " + s.rocr.path + " (umem_hip_double_detach_rocr first)";
    return -1;
  }
  if (std::string why = attach(s.rocr, path); !why.empty()) {
    s.last_message = why;
    return -1;
  }
  s.devices_before_attach = s.device_count;
  s.device_count = static_cast<int>(s.rocr.devices.size());
  s.last_message.clear();
  return 0;
}

// Test control: forgets every memory object (their ROCr memory goes with the last hsa_shut_down,
// which names what leaked in the ROCr double's log), hsa_shut_down, dlclose; the device count is
// the one before the attach again.
UMEM_DOUBLE_EXPORT void umem_hip_double_detach_rocr() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!s.rocr.attached()) return;
  s.objects.clear();
  s.leaked.clear();
  detach(s.rocr);
  s.device_count = s.devices_before_attach;
}

// Test control: why the last attach failed ("" after a success). Valid until the next attach.
UMEM_DOUBLE_EXPORT const char* umem_hip_double_last_message() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.last_message.c_str();
}
