// How memory becomes GPU-visible on the machine's GPU runtime (machine/gpu_runtime.hpp): the one
// place that builds the allocator's mappers and device memory sources from it.
//
// What each runtime means by "GPU-accessible host memory":
//   rocr: HIP loaded in the process -> registered with HIP (hipHostRegister), whatever XNACK
//         says (hip_gpu_mapper.hpp, Note [GPU visibility under HIP]); otherwise XNACK on -> SVM
//         attributes, off -> locked to the node's CPU pool (rocr_gpu_mapper.hpp).
//   cuda: PAGEABLE_MEMORY_ACCESS (HMM, Grace) -> nothing to do; otherwise registered with the
//         driver, portable and device-mapped, at the same address (cuda_gpu_mapper.hpp).
//   none: host memory only.
// And what `device:D` placements get (Note [Device memory kinds] in machine/gpu_memory_kind.hpp):
//   cuda: discrete devices -> the device's own memory (cuda_device_source.hpp); unified ones ->
//         host memory on the GPU's node, as every other placement.
//   rocr: discrete GPUs (MI300X) -> the GPU's coarse-grained VRAM pool (rocr_device_source.hpp;
//         known to HIP as a pool allocation; its segments do not grow when HIP is loaded);
//         unified ones (MI300A) -> host memory on the GPU's node.
//   none: host memory.
#pragma once

#include <memory>

#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/allocator/source/device_memory_source.hpp"
#include "umem/core/topology.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::alloc {

// The mapper that makes host ranges GPU-accessible on `rt`; `topo` must come from
// rt.discover() and carry GPU->NUMA bindings. The mapper keeps the runtime's library loaded.
// Throws what the mapper constructors throw.
std::unique_ptr<gpu_mapper> make_gpu_mapper(const machine::gpu_runtime& rt, const topology& topo);

// The source of GPU `device`'s own memory (`device` indexes topo.gpus(), as placements do), for
// a discrete GPU `rt` can allocate on; null when `device:D` stays host memory (unified GPUs,
// GPUs of another runtime, and every GPU of the none runtime). `topo` must come from
// rt.discover(). The source keeps the runtime's library loaded. Throws umem::error:
// invalid_argument for an unknown device; what the source's constructor throws.
std::unique_ptr<device_memory_source> make_device_memory_source(const machine::gpu_runtime& rt,
                                                                const topology& topo, int device);

}  // namespace umem::alloc
