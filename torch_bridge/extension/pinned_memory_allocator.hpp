// umem as PyTorch's pinned-memory allocator, part of the CUDA (HIP) allocator extension.
//
// Note [Pinned memory allocator]
// PyTorch's pinned memory (`torch.empty(..., pin_memory=True)`, the copy `pin_memory()` makes of
// memory that is not pinned, the DataLoader's pin thread) comes from the host allocator of the
// GPU's device type. Up to 2.7 that is a file-static CachingHostAllocator with no setter
// (ATen/cuda/PinnedMemoryAllocator.h: getPinnedMemoryAllocator() returns
// getCachingHostAllocator()). From 2.8 on, ATen keeps one at::HostAllocator per device type
// (ATen/core/CachingHostAllocator.h: setHostAllocator, getHostAllocator; the CUDA one registered
// with REGISTER_HOST_ALLOCATOR at priority 0) and every pinned allocation and every non_blocking
// copy's record_event asks it (aten/src/ATen/native/cuda/Copy.cu). umem's serves:
// - allocate: a block of umem's host path (umem_torch_host_malloc, the CPU tensors' path), so
//   pinned memory is umem memory: placed by umem's policy, registered with the GPU runtime per
//   segment, counted in umem.torch.memory_stats("cpu"), and pin_memory() of it is itself.
// - record_event(ptr, ctx, stream): the block the storage's context names (umem's DataPtrs carry
//   their block as context; a CPU tensor of umem's CPU allocator is one too) waits for the stream
//   before it is reused (umem_torch_host_record_use, Note [Host blocks in flight] in bridge.hpp).
//   Memory that is not umem's answers false, as PyTorch's allocator does for blocks it does not
//   know.
// - empty_cache: umem_torch_empty_cache(0): blocks whose streams are done go back to their pools,
//   and free cached segments to the system.
// - get_stats and the resets (torch.cuda.host_memory_stats() and its resets): umem's host
//   statistics (umem_torch_get_device_stats(UMEM_TORCH_HOST), umem.torch.memory_stats("cpu")),
//   which count pinned blocks together with umem's CPU tensors (on a machine where umem is the CPU
//   allocator every CPU tensor is pinned memory). active_requests and active_bytes are umem's live
//   host blocks (sizes rounded as PyTorch's CUDA allocator rounds, to 512 bytes; PyTorch's host
//   allocator rounds its blocks up to a power of two); allocations, allocated_bytes,
//   num_host_alloc and num_host_free are umem's host segments, which are what umem obtains and
//   registers with the GPU runtime (PyTorch's host allocator registers every block alone). The
//   durations (host_alloc_time, host_free_time) are not measured and stay zero.
// - begin_allocate_to_pool, end_allocate_to_pool, release_pool where the release declares them:
//   graph captures' private pools (Note [Pinned memory in graph captures] in pinned_graph_pools.hpp).
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>

#include "torch_compat.hpp"
#include "library_functions.hpp"
#include "umem/umem_torch.h"

#if UMEM_TORCH_AT_LEAST(2, 8)
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include "pinned_graph_pools.hpp"
#include "relaxed_capture.hpp"
#define UMEM_TORCH_HOST_ALLOCATOR 1
#else
#define UMEM_TORCH_HOST_ALLOCATOR 0
#endif

namespace umem_extension {

// umem's statistic into PyTorch's (whose Stat type differs between releases and allocators).
template <class S>
void add_stat(S& to, const umem_torch_stat& from) {
  to.current += from.current;
  to.peak += from.peak;
  to.allocated += from.allocated;
  to.freed += from.freed;
}

#if UMEM_TORCH_HOST_ALLOCATOR

inline pinned_graph_pools pinned_pools;

// A deleter cannot throw: umem logs host_free's failures, and a block whose graph pool could not
// record it (out of memory) is left allocated, since a graph may still read it.
inline void pinned_release(void* p) noexcept {
  try {
    if (p == nullptr || pinned_pools.keep(p)) return;
  } catch (...) {
    return;
  }
  (void)fn.umem_torch_host_free(p);
}

inline void pinned_check(umem_status s, const char* what) {
  TORCH_CHECK(s == UMEM_OK, "umem pinned-memory allocator: ", what, ": ", fn.umem_torch_last_error());
}

// True where A does not declare the graph-pool functions (Note [Pinned memory in graph
// captures]) or declares them in the form pinned_memory_allocator overrides.
template <class A, class = void>
struct graph_pools_overridable : std::true_type {};
template <class A>
struct graph_pools_overridable<A, std::void_t<decltype(&A::begin_allocate_to_pool),
                                              decltype(&A::end_allocate_to_pool),
                                              decltype(&A::release_pool)>>
    : std::bool_constant<
          std::is_same_v<decltype(&A::begin_allocate_to_pool),
                         void (A::*)(mempool_id, std::function<bool(c10::Stream)>)> &&
          std::is_same_v<decltype(&A::end_allocate_to_pool), void (A::*)(mempool_id)> &&
          std::is_same_v<decltype(&A::release_pool), void (A::*)(mempool_id)>> {};

class pinned_memory_allocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &pinned_release, cpu};
    void* p = nullptr;
    umem_status s = UMEM_OK;
    {
      // A capture underway: a new segment's registration must not invalidate it.
      const relaxed_capture relaxed(pinned_pools.capturing());
      s = fn.umem_torch_host_malloc(n, -1, &p);
    }
    TORCH_CHECK_WITH(OutOfMemoryError, s != UMEM_ERR_OUT_OF_MEMORY,
                     "umem pinned-memory allocator: ", fn.umem_torch_last_error());
    TORCH_CHECK(s == UMEM_OK, "umem pinned-memory allocator: ", fn.umem_torch_last_error());
    try {
      pinned_pools.adopt(p, c10::cuda::getCurrentCUDAStream());
    } catch (...) {  // std::bad_alloc, or the capture's filter threw: the block is nobody's
      (void)fn.umem_torch_host_free(p);
      throw;
    }
    return {p, p, &pinned_release, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pinned_release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count != 0) std::memcpy(dest, src, count);
  }
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    const c10::cuda::CUDAStream s(c10::cuda::CUDAStream::UNCHECKED, stream);
    return fn.umem_torch_host_record_use(ctx != nullptr ? ctx : ptr, s.stream(), stream.device_index()) ==
           UMEM_OK;
  }
  void empty_cache() override { (void)fn.umem_torch_empty_cache(0, nullptr); }
  at::HostStats get_stats() override {
    umem_torch_device_stats u{};
    pinned_check(fn.umem_torch_get_device_stats(UMEM_TORCH_HOST, &u), "statistics");
    at::HostStats s;
    add_stat(s.active_requests, u.active[0]);
    add_stat(s.active_bytes, u.active_bytes[0]);
    add_stat(s.allocations, u.segment[0]);
    add_stat(s.allocated_bytes, u.reserved_bytes[0]);
    s.num_host_alloc = u.num_device_alloc;
    s.num_host_free = u.num_device_free;
    return s;
  }
  void reset_accumulated_stats() override {
    pinned_check(fn.umem_torch_reset_accumulated_stats(UMEM_TORCH_HOST), "reset_accumulated_host_memory_stats");
  }
  void reset_peak_stats() override {
    pinned_check(fn.umem_torch_reset_peak_stats(UMEM_TORCH_HOST), "reset_peak_host_memory_stats");
  }
  // Overrides where at::HostAllocator declares them (graph_pools_overridable).
  void begin_allocate_to_pool(mempool_id id, std::function<bool(c10::Stream)> filter) {
    pinned_pools.begin(id, std::move(filter));
  }
  void end_allocate_to_pool(mempool_id id) { pinned_pools.end(id); }
  void release_pool(mempool_id id) {
    for (void* p : pinned_pools.release(id)) (void)fn.umem_torch_host_free(p);
  }
};
static_assert(std::is_same_v<mempool_id, pinned_graph_pools::pool_id>);
static_assert(graph_pools_overridable<at::HostAllocator>::value,
              "at::HostAllocator's graph-pool functions changed: pinned_memory_allocator's "
              "no longer override them");

inline pinned_memory_allocator the_pinned_allocator;

// setHostAllocator's priority argument, where the release has one (above PyTorch's 0).
template <class A>
auto set_host_allocator_of(A* a, int) -> decltype(at::setHostAllocator(at::kCUDA, a, 1), void()) {
  at::setHostAllocator(at::kCUDA, a, std::uint8_t{1});
}
template <class A>
void set_host_allocator_of(A* a, long) {
  at::setHostAllocator(at::kCUDA, a);
}

#endif

// Makes umem PyTorch's pinned-memory allocator where the release allows (Note [Pinned memory
// allocator]); whether the allocator ATen's pinned memory now comes from is umem's.
inline bool set_pinned_allocator() {
#if UMEM_TORCH_HOST_ALLOCATOR
  TORCH_CHECK(fn.umem_torch_host_malloc != nullptr, "umem: install() the library's functions first");
  set_host_allocator_of(&the_pinned_allocator, 0);
  return at::getHostAllocator(at::kCUDA) == &the_pinned_allocator;
#else
  return false;
#endif
}

}  // namespace umem_extension
