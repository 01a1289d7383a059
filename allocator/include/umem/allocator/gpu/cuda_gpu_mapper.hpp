// Making host NUMA memory usable by NVIDIA GPUs through the CUDA driver.
//
// Note [Registration mode and pageable mode]
// Pageable mode: every CUDA GPU of the topology has PAGEABLE_MEMORY_ACCESS (HMM on a recent
// kernel, or Grace Hopper's ATS): the GPU reaches plain host memory at its own address, so map()
// and unmap() do nothing.
// Registration mode (discrete cards without HMM: the H200 of
// docs/log/2026-11-30-h200-gpu-tests-and-copies.md): map() pins the range with cuMemHostRegister(PORTABLE | DEVICEMAP) in device 0's primary context (PORTABLE
// makes the registration count for every context and device), then asks
// cuMemHostGetDevicePointer for the device address: zero-copy needs it to equal the host address
// (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM); if it does not, the registration is undone and map()
// throws umem::error(unsupported). unmap() is cuMemHostUnregister. Registration does not move
// pages: NUMA placement stays mbind's job, and the GPU reads them across PCIe (uncached on the
// GPU side, so coherent at every coherence kind umem asks for).
// Unlike the ROCr mapper, no GPU has to be local to the segment's node: a portable registration
// serves every GPU, and on NVIDIA the choice of node only changes the distance.
// The runtime's own calls: HIP accepts in its copies and fills only memory it has an object for
// (Note [GPU visibility under HIP] in hip_gpu_mapper.hpp), and CUDA asks the same question. In
// registration mode the driver knows the range (cuMemHostRegister: page-locked memory the driver
// tracks and accelerates cudaMemcpy* for), which is why PyTorch's copies of umem tensors work on
// the H200 (docs/log/2026-12-01-pytorch-parity-on-h200.md). In pageable mode nothing is
// registered: the CUDA Programming Guide's "Unified Memory on Devices with Full CUDA Unified Memory Support" (Grace Hopper's ATS,
// HMM with driver 535+ and open kernel modules; the GB10 likewise reports pageable memory access)
// makes every system allocation unified memory, usable by kernels and by CUDA's memory calls like
// managed memory. That is the documentation's word; umem has not run on a Grace Hopper or GB10.
//
// Memory umem did not allocate (register_foreign): in registration mode a zero-copy alias of it
// is registered the same way for the alias's life (Note [Foreign registrations] in
// foreign_registrations.hpp), so the GPU reaches it in place (pins_foreign()); in pageable mode
// nothing is needed.
//
// In a forked child (Note [Fork] in fork_safety.hpp) no driver call is made: map() and unmap()
// do nothing (host memory only), register_foreign is refused, and the primary context is not
// released at destruction.
//
// Thread safety: map() and unmap() make the primary context current for the call only (and
// restore the thread's previous one), so both may be called from any thread.
#pragma once

#include <memory>
#include <string>

#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/gpu/foreign_registrations.hpp"
#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/core/topology.hpp"
#include "umem/cuda_runtime/cuda_context.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::alloc {

class cuda_gpu_mapper final : public gpu_mapper {
 public:
  // `drv` must be the driver `topo`'s CUDA agents were discovered through (cuInit done). Throws
  // umem::error: invalid_argument when `topo` has no CUDA GPU; unsupported when registration is
  // needed but a GPU cannot map host memory (CAN_MAP_HOST_MEMORY or HOST_REGISTER_SUPPORTED 0);
  // runtime_error when the primary context cannot be retained.
  cuda_gpu_mapper(std::shared_ptr<const cuda::cuda_driver> drv, const umem::topology& topo);
  ~cuda_gpu_mapper() override;

  // Throws umem::error: invalid_argument for an empty segment; unsupported when the device
  // address differs from the host address; runtime_error naming the driver call otherwise.
  void map(const segment& s) override;
  // Failures are logged (errors), never thrown.
  void unmap(const segment& s) noexcept override;
  // False in a forked child (Note [Fork]).
  bool gpu_accessible() const override { return !creator_.is_other(); }
  bool pageable() const override { return false; }  // registered pages are pinned
  std::string describe() const override;
  std::shared_ptr<void> register_foreign(const void* p, std::size_t bytes) override;
  bool pins_foreign() const override { return ctx_ != nullptr && !creator_.is_other(); }

  // False in pageable mode.
  bool registers() const { return ctx_ != nullptr; }

 private:
  std::shared_ptr<const cuda::cuda_driver> drv_;
  std::shared_ptr<cuda::cuda_primary_context> ctx_;   // registration mode only
  std::shared_ptr<foreign_registrations> foreign_;   // registration mode only
  creating_process creator_;
  std::string reason_;
};

}  // namespace umem::alloc
