// A discrete NVIDIA GPU's own memory as an upstream source, in the device's primary context
// (Note [Why the primary context] in cuda_context.hpp), so the memory belongs to the context
// PyTorch's streams and kernels use.
//
// Segments are multiples of granularity (2 MiB, the driver's large-page size, and the caching
// pool's small-segment size). allocate() is cuMemAlloc / cuMemFree. allocate_growable() and
// grow() use the driver's virtual memory API where it has one (Note [Growable device segments]),
// so the pool's expandable segment grows in place instead of taking a new segment for every
// large miss; elsewhere they keep the defaults (allocate(), false).
//
// Note [Growable device segments]
// With every VMM entry point in the driver (cuda_driver::has_virtual_memory) and the device's
// VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED attribute set, a growable segment is a cuMemAddressReserve
// of reserved_size bytes whose first `size` bytes are mapped. Each allocate_growable() or grow()
// maps the new range one chunk at a time (cuMemCreate of pinned memory on this device and cuMemMap
// per chunk), then one cuMemSetAccess read/write for this device over the range. The source keeps
// every chunk's handle per reservation, so deallocate() can synchronize the context (cuMemUnmap,
// unlike cuMemFree, is not known to wait for kernels still using the memory), unmap and release
// each chunk and free the reservation. The chunk is the least common multiple of 2 MiB and the
// driver's minimum granularity for such memory (cuMemGetAllocationGranularity; 2 MiB on the
// H200). A growth that fails half way unmaps and releases what it had made. Plain allocate()
// stays cuMemAlloc: one call instead of four, and memory other devices reach once peer access is
// enabled (a VMM range is accessible to exactly the devices cuMemSetAccess names, here this one).
//
// Note [Giving device pages back]
// Why a handle per chunk: PyTorch's empty_cache gives back the free pages of an expandable
// segment that still holds live blocks (its ExpandableSegment maps one handle per page), and so
// must umem's (caching_pool::trim, Note [Decommitted pages] in caching_pool.hpp); a handle can
// only be unmapped whole. decommit() unmaps and releases the chunks of the span (after one
// cuCtxSynchronize: a block freed on its stream may still be used by a kernel queued there, and
// PyTorch's allocator synchronizes the stream before it unmaps for the same reason), leaving the
// address range reserved; recommit() maps fresh chunks there before the pool hands the range out
// again (an unmapped device range is not backed on touch: a kernel touching it faults). The
// synchronization makes decommit illegal during a CUDA graph capture; the torch bridge never
// trims while a capture runs, as PyTorch's allocator never releases its cache then. A cuMemAlloc
// segment keeps its pages (decommit answers false): the pool stops asking for that segment.
//
// Out of device memory (CUDA_ERROR_OUT_OF_MEMORY from cuMemAlloc, cuMemAddressReserve,
// cuMemCreate or cuMemMap) is umem::error(out_of_memory) naming the device, the request and
// cuMemGetInfo's free/total; every other failure is runtime_error naming the driver call.
//
// Thread safety: every member function may be called from any thread; each makes the primary
// context current for the call only and restores the thread's previous context. One mutex guards
// the reservations' bookkeeping; grow() holds it while it maps, so growths are serialized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "umem/allocator/gpu/growable_reservations.hpp"
#include "umem/allocator/source/device_memory_source.hpp"
#include "umem/core/topology.hpp"
#include "umem/cuda_runtime/cuda_context.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::alloc {

class cuda_device_source final : public device_memory_source {
 public:
  static constexpr std::size_t granularity = std::size_t{2} << 20;

  // `gpu` must be a CUDA agent discovered through `drv` (cuInit done). Retains the device's
  // primary context for the source's life and decides once whether segments can grow (Note
  // [Growable device segments]). Throws umem::error: invalid_argument when `gpu` is not a CUDA
  // agent; runtime_error when the context cannot be retained.
  cuda_device_source(std::shared_ptr<const cuda::cuda_driver> drv, const agent& gpu);

  // cuMemAlloc of `bytes` rounded up to granularity. Throws umem::error: invalid_argument for 0
  // or a size that overflows when rounded; out_of_memory; runtime_error.
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  // A reservation of `reserve_bytes` with `bytes` mapped, both rounded up to the chunk size;
  // allocate() when segments cannot grow or the reservation would be no larger. Throws as
  // allocate() does.
  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override;
  // Maps `extra_bytes` rounded up to the chunk size after what `s` has mapped; false when `s`
  // is not a growable segment of this source or its reservation has no room for that.
  bool grow(segment& s, std::size_t extra_bytes) override;
  // Unmaps the chunks [p, p + bytes) of a growable segment after synchronizing the context;
  // false for a cuMemAlloc segment or a span that is not whole mapped chunks (Note [Giving device
  // pages back]).
  bool decommit(const segment& s, void* p, std::size_t bytes) override;
  // Maps the given-back chunks inside [p, p + bytes) again; throws as grow() does.
  void recommit(const segment& s, void* p, std::size_t bytes) override;
  // Failures are logged (errors), never thrown.
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;
  std::pair<std::uint64_t, std::uint64_t> memory_info() const override;

  // The size of one mapped range's unit; 0 when segments cannot grow here.
  std::size_t chunk_size() const { return chunk_; }

 private:
  using reservation = growable_reservations<cuda::cu_mem_handle>::reservation;
  using mapped_range = growable_reservations<cuda::cu_mem_handle>::mapped_range;

  std::size_t vmm_chunk() const;
  // `bytes` rounded up to a multiple of `unit`; invalid_argument for 0 or an overflow.
  std::size_t rounded_request(std::size_t bytes, std::size_t unit) const;
  // [base + offset, + size) mapped, one handle per chunk; the ranges in order.
  std::vector<mapped_range> map_range(cuda::cu_deviceptr base, std::size_t offset,
                                      std::size_t size) const;
  void unmap_range(cuda::cu_deviceptr base, const mapped_range& m) const noexcept;
  void release_reservation(cuda::cu_deviceptr base, const reservation& r) const noexcept;
  // Throws unless `r` is success: out_of_memory for CUDA_ERROR_OUT_OF_MEMORY, else
  // runtime_error, both naming `call`, `bytes` and the device.
  void check_call(const char* call, std::size_t bytes, cuda::cu_result r) const;
  void log_failure(const char* call, cuda::cu_result r) const noexcept;

  std::shared_ptr<const cuda::cuda_driver> drv_;
  cuda::cuda_primary_context ctx_;
  std::string name_;  // "CUDA device 0 (NVIDIA H200)"
  std::size_t chunk_ = 0;

  growable_reservations<cuda::cu_mem_handle> reservations_;
};

}  // namespace umem::alloc
