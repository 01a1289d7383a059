#include "umem/core/topology.hpp"

#include <cstdio>

#include "umem/core/error.hpp"

namespace umem {

coherence memory_pool::coherence_kind() const {
  if (!is_global()) return coherence::unknown;
  // Extended-scope fine is a superset of fine; test it first.
  if (global_flags & pool_flag::extended_scope_fine_grained) return coherence::extended_fine;
  if (global_flags & pool_flag::fine_grained) return coherence::fine;
  if (global_flags & pool_flag::coarse_grained) return coherence::coarse;
  return coherence::unknown;
}

std::optional<bool> agent::isa_xnack() const {
  for (const auto& isa : isas) {
    if (isa.find(":xnack+") != std::string::npos) return true;
    if (isa.find(":xnack-") != std::string::npos) return false;
  }
  return std::nullopt;
}

std::string agent::pci_address() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", pci_domain.value_or(0), (bdfid >> 8) & 0xffu,
                (bdfid >> 3) & 0x1fu, bdfid & 0x7u);
  return buf;
}

bool kfd_node::is_gpu() const { return property("simd_count").value_or(0) > 0; }

std::optional<std::uint64_t> kfd_node::property(const std::string& key) const {
  auto it = properties.find(key);
  if (it == properties.end()) return std::nullopt;
  return it->second;
}

std::vector<const agent*> topology::gpus() const {
  std::vector<const agent*> out;
  for (const auto& a : agents)
    if (a.kind == agent_kind::gpu) out.push_back(&a);
  return out;
}

std::vector<const agent*> topology::cpus() const {
  std::vector<const agent*> out;
  for (const auto& a : agents)
    if (a.kind == agent_kind::cpu) out.push_back(&a);
  return out;
}

const agent* topology::find_agent_by_kfd_node(std::uint32_t node) const {
  for (const auto& a : agents)
    if (a.kfd_node == node) return &a;
  return nullptr;
}

const numa_node* topology::find_numa_node(int os_index) const {
  for (const auto& n : numa.nodes)
    if (n.os_index == os_index) return &n;
  return nullptr;
}

std::optional<bool> topology::xnack_enabled() const {
  if (hsa.xnack_enabled) return hsa.xnack_enabled;
  // XNACK is process-wide: one GPU ISA saying xnack- means malloc'd memory is not GPU-safe.
  std::optional<bool> result;
  for (const auto* g : gpus()) {
    auto x = g->isa_xnack();
    if (!x) continue;
    if (!*x) return false;
    result = true;
  }
  return result;
}

const char* to_string(agent_kind k) {
  switch (k) {
    case agent_kind::cpu: return "cpu";
    case agent_kind::gpu: return "gpu";
    case agent_kind::other: return "other";
  }
  return "other";
}

const char* to_string(pool_segment s) {
  switch (s) {
    case pool_segment::global: return "global";
    case pool_segment::readonly: return "readonly";
    case pool_segment::private_: return "private";
    case pool_segment::group: return "group";
  }
  return "unknown";
}

const char* to_string(coherence c) {
  switch (c) {
    case coherence::fine: return "fine";
    case coherence::coarse: return "coarse";
    case coherence::extended_fine: return "extended_fine";
    case coherence::unknown: return "unknown";
  }
  return "unknown";
}

coherence parse_coherence(std::string_view text) {
  constexpr coherence settable[] = {coherence::fine, coherence::coarse, coherence::extended_fine};
  std::string accepted;
  for (coherence c : settable) {
    if (text == to_string(c)) return c;
    accepted += (accepted.empty() ? "" : ", ") + std::string(to_string(c));
  }
  throw_error(errc::invalid_argument, "'" + std::string(text) + "' is not one of " + accepted);
}

const char* to_string(runtime_state s) {
  switch (s) {
    case runtime_state::not_probed: return "not-probed";
    case runtime_state::available: return "available";
    case runtime_state::no_library: return "no-library";
    case runtime_state::no_driver: return "no-driver";
    case runtime_state::init_failed: return "init-failed";
    case runtime_state::imported: return "imported";
  }
  return "unknown";
}

const char* to_string(iommu_mode m) {
  switch (m) {
    case iommu_mode::unknown: return "unknown";
    case iommu_mode::off: return "off";
    case iommu_mode::passthrough: return "passthrough";
    case iommu_mode::translated: return "translated";
  }
  return "unknown";
}

const char* to_string(pool_location l) { return l == pool_location::cpu ? "cpu" : "gpu"; }

}  // namespace umem
