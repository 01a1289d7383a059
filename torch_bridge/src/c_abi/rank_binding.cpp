// libumem_torch's C ABI, umem_torch.h's section "Machine and rank binding": the machine's topology,
// a local rank's binding (rank_binding.hpp) and the calling thread's memory policy.
#include <nlohmann/json.hpp>

#include "bridge_instance.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/numa/memory_policy.hpp"
#include "umem/torch_bridge/rank_binding.hpp"
#include "umem/umem_torch.h"

using umem::torch_bridge::bridge;
using umem::torch_bridge::c_abi::get_bridge;
using umem::torch_bridge::c_abi::last;

namespace {

umem::topology topology_of(const char* snapshot_json) {
  if (snapshot_json != nullptr) return umem::snapshot_from_json(snapshot_json, "<snapshot given>");
  return umem::machine::discover_live_machine().topo;
}

}  // namespace

extern "C" {

char* umem_torch_topology_json(const char* snapshot_json) {
  return guarded_string(last, [&] { return umem::snapshot_to_json(topology_of(snapshot_json)); });
}

char* umem_torch_rank_binding_json(const char* snapshot_json, int local_rank, int local_size) {
  return guarded_string(last, [&] {
    return umem::torch_bridge::to_json(
        umem::torch_bridge::bind_rank(topology_of(snapshot_json), local_rank, local_size));
  });
}

umem_status umem_torch_set_memory_policy(int node, const char* mode) {
  return guarded(last, [&] {
    umem::numa::set_thread_memory_policy(
        node, umem::numa::parse_policy_mode(mode == nullptr ? "bind" : mode));
  });
}

}  // extern "C"
