// The live machine as umem sees it: hwloc NUMA nodes, KFD topology and kernel knobs, ROCr agents
// when a runtime and driver are present, and each GPU's NUMA node. Shared by the allocator and
// umtopo so both describe the machine the same way.
#pragma once

#include <optional>

#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {

struct live_machine {
  topology topo;
  // The loaded runtime, kept so GPU mappings can use the same library; nullopt when none loads
  // (topo.hsa says why).
  std::optional<hsa::rocr_library> rocr;
};

// Never throws for a missing runtime or driver (recorded in topo.hsa); throws umem::error when
// the NUMA view itself cannot be read.
live_machine discover_live_machine();

}  // namespace umem::alloc
