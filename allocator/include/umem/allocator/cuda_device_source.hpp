// A discrete NVIDIA GPU's own memory as an upstream source: cuMemAlloc / cuMemFree in the
// device's primary context (Note [Why the primary context] in cuda_context.hpp), so the memory
// belongs to the context PyTorch's streams and kernels use.
//
// Segments are multiples of granularity (2 MiB, the driver's large-page size, and the caching
// pool's small-segment size) and cannot grow: allocate_growable() and grow() keep the defaults,
// so the pool above takes a new segment for every large miss. Growing in place needs the
// virtual memory API (cuMemAddressReserve / cuMemCreate / cuMemMap), a follow-up.
// Out of device memory (CUDA_ERROR_OUT_OF_MEMORY) is umem::error(out_of_memory) naming the
// device, the request and cuMemGetInfo's free/total; every other failure is runtime_error naming
// the driver call.
//
// Thread safety: every member function may be called from any thread; each makes the primary
// context current for the call only and restores the thread's previous context.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "umem/allocator/device_memory_source.hpp"
#include "umem/core/topology.hpp"
#include "umem/cuda_runtime/cuda_context.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::alloc {

class cuda_device_source final : public device_memory_source {
 public:
  static constexpr std::size_t granularity = std::size_t{2} << 20;

  // `gpu` must be a CUDA agent discovered through `drv` (cuInit done). Retains the device's
  // primary context for the source's life. Throws umem::error: invalid_argument when `gpu` is not
  // a CUDA agent; runtime_error when the context cannot be retained.
  cuda_device_source(std::shared_ptr<const cuda::cuda_driver> drv, const agent& gpu);

  // `bytes` rounded up to granularity. Throws umem::error: invalid_argument for 0 or a size that
  // overflows when rounded; out_of_memory; runtime_error.
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  // Failures are logged (errors), never thrown.
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;
  std::pair<std::uint64_t, std::uint64_t> memory_info() const override;

 private:
  std::shared_ptr<const cuda::cuda_driver> drv_;
  cuda::cuda_primary_context ctx_;
  std::string name_;  // "CUDA device 0 (NVIDIA H200)"
};

}  // namespace umem::alloc
