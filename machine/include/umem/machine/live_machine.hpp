// The live machine as umem sees it: hwloc NUMA nodes, KFD topology and kernel knobs, ROCr agents
// when a runtime and driver are present, the selected GPU runtime (gpu_runtime_selection.hpp:
// ROCr, CUDA or none) with the GPUs it discovered, and each GPU's NUMA node. Shared by the
// allocator, the torch bridge and umtopo so all describe the machine the same way.
#pragma once

#include <memory>

#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::machine {

struct live_machine {
  topology topo;
  // The loaded runtime (the process's one load of it, shared with a ROCr runtime); null when
  // none loads (topo.hsa says why).
  std::shared_ptr<const hsa::rocr_library> rocr;
  // The selected runtime (never null); topo.gpu_backend says which and why.
  std::shared_ptr<const gpu_runtime> runtime;
};

// Never throws for a missing runtime or driver (recorded in topo.hsa / topo.cuda); throws
// umem::error when the NUMA view itself cannot be read or UMEM_GPU_BACKEND is not a runtime.
live_machine discover_live_machine();

}  // namespace umem::machine
