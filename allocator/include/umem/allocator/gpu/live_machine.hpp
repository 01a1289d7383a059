// The live machine as umem sees it: hwloc NUMA nodes, KFD topology and kernel knobs, ROCr agents
// when a runtime and driver are present, the selected GPU backend (gpu_backend.hpp: ROCr, CUDA or
// none) with the GPUs it discovered, and each GPU's NUMA node. Shared by the allocator and umtopo
// so both describe the machine the same way.
#pragma once

#include <memory>

#include "umem/allocator/gpu/gpu_backend.hpp"
#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {

struct live_machine {
  topology topo;
  // The loaded runtime (the process's one load of it, shared with a ROCr backend); null when
  // none loads (topo.hsa says why).
  std::shared_ptr<const hsa::rocr_library> rocr;
  // The selected backend (never null); topo.gpu_backend says which and why.
  std::shared_ptr<const gpu_backend> backend;
};

// Never throws for a missing runtime or driver (recorded in topo.hsa / topo.cuda); throws
// umem::error when the NUMA view itself cannot be read or UMEM_GPU_BACKEND is not a backend.
live_machine discover_live_machine();

}  // namespace umem::alloc
