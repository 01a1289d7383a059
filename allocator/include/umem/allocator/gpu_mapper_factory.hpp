// Choosing the gpu_mapper from the runtime's state, so that callers never decide it.
#pragma once

#include <memory>

#include "umem/allocator/gpu_mapper.hpp"
#include "umem/core/topology.hpp"

namespace umem::hsa {
class rocr_library;
}

namespace umem::alloc {

// By topo.gpu_backend (set by live discovery): "none" -> no_gpu_mapper with its reason; "cuda" ->
// a cuda_gpu_mapper on the CUDA driver (loaded again with cuda_driver::load, kept by the mapper;
// `lib` is not used). Otherwise (a ROCr backend, or a topology read from captures):
// no_gpu_mapper when `lib` is null or topo.hsa.state is not `available` (the reason is taken from
// topo.hsa); otherwise a rocr_gpu_mapper on `lib` (which must outlive it), in SVM mode when
// topo.xnack_enabled() is true and in lock mode otherwise. `topo` must come from that runtime
// and carry NUMA nodes and GPU->NUMA bindings (umem::numa::map_gpus_to_numa). Throws what the
// rocr_gpu_mapper constructor throws: a topology that claims a runtime which then cannot be
// initialised is a misconfiguration, not a reason to fall back silently.
std::unique_ptr<gpu_mapper> make_gpu_mapper(const umem::topology& topo,
                                            const hsa::rocr_library* lib);

}  // namespace umem::alloc
