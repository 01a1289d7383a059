// umem as PyTorch's whole CUDA allocator (HIP on ROCm builds: torch.utils.cpp_extension hipifies
// this file). Built against the installed PyTorch by python/umem/_extension.py and installed with
// torch.cuda.memory.change_current_allocator; libumem_torch.so does the memory work through its C
// functions (umem/umem_torch.h), whose addresses the Python package hands over, so the library
// is loaded once, by the package.
//
// Note [Two allocators, one interface]
// PyTorch's pluggable allocator passes only malloc and free: record_stream, statistics,
// snapshots, graph private pools and MemPools stay unimplemented there. Implementing
// c10::cuda::CUDACachingAllocator::CUDAAllocator gives all of them. Default allocations are
// umem's: placed on the device's NUMA node (or its own memory on a discrete GPU), reused in
// stream order, counted in PyTorch's statistics. Allocations routed to a private pool (a graph
// capture, torch.cuda.use_mem_pool, torch.compile's CUDA graphs) go to PyTorch's own caching
// allocator, which keeps those pools with their exact semantics (checkpoints, live-allocation
// checks, use_on_oom, no_split); their segments come from umem too, unless the MemPool brought
// its own allocator. Every call PyTorch makes about those pools is forwarded to it.
//
// Note [Capture safety]
// While any pool routing is active (a capture may be underway in some thread), umem records and
// queries no events (umem_torch_capture_begin) and every umem call runs in relaxed capture mode,
// so that an allocation on another thread does not invalidate a capture in "global" mode.
//
// Note [Where a PyTorch allocation goes]
// The path of `torch.empty(n, device="cuda")` once umem.torch.enable() ran, in both modes (files:
// python/umem/torch/enabling.py, python/umem/_extension.py, this file,
// torch_bridge/src/c_abi/enabling.cpp and bridge.cpp, allocator/src/allocator.cpp and
// pool/caching_pool.cpp; tests/check_line_references.py keeps every file:line below on its name):
//  1. PyTorch: at::detail::empty_cuda (aten/src/ATen/cuda/EmptyTensor.cpp) takes
//     at::cuda::getCUDADeviceAllocator(), which is c10::cuda::CUDACachingAllocator::get()
//     (c10/cuda/CUDACachingAllocator.h): the allocator stored by
//     torch.cuda.memory.change_current_allocator (enabling.py:184). at::detail::empty_generic
//     (aten/src/ATen/EmptyTensor.cpp) makes the storage with that allocator's allocate(nbytes).
//  2. Extension mode: that allocator is umem_cuda_allocator (this file), made by
//     extension.make_allocator (enabling.py:179). Its allocate() (umem_cuda_allocator.cpp:168)
//     calls umem_alloc(), which calls fn.umem_torch_extension_alloc (umem_cuda_allocator.cpp:561):
//     a pointer into libumem_torch.so that the Python package passed to install()
//     (_extension.py:122) and take_library_functions (library_functions.hpp:39) took, so that the
//     library is loaded once. Pluggable mode: the allocator is PyTorch's CUDAPluggableAllocator
//     (torch/csrc/cuda/CUDAPluggableAllocator.cpp), whose allocate() calls the function
//     torch.cuda.memory.CUDAPluggableAllocator looked up by name in the library,
//     umem_torch_pluggable_malloc (enabling.py:182).
//  3. The C ABI: umem_torch_extension_alloc (enabling.cpp:172) or umem_torch_pluggable_malloc
//     (enabling.cpp:142) calls the process's bridge.
//  4. The bridge: bridge::allocate (bridge.cpp:294) first reuses a block freed on the same stream,
//     cache_->reuse (bridge.cpp:339, stream_ordered_cache.cpp); else bridge::allocate_capped
//     (bridge.cpp:270) asks umem's allocator, alloc_->allocate (bridge.cpp:270), under the memory
//     fraction's cap.
//  5. The allocator: allocator::allocate (allocator.cpp:452) takes a cached block of the policy's
//     pool, allocate_cached_or (caching_pool.hpp:238), without a lock where it can (Note [Fast
//     path]); else it resolves the device's placement and allocator::allocate_from (allocator.cpp:476)
//     tries the pool of its NUMA node, caching_pool::try_allocate (caching_pool.cpp:249): a cached
//     block, else a new segment; out of memory, the reclaim ladder.
// On free, the tensor's DataPtr deleter is delete_block (umem_cuda_allocator.cpp:602), whose free()
// calls fn.umem_torch_extension_release (umem_cuda_allocator.cpp:198) and so
// umem_torch_extension_release (enabling.cpp:182); in pluggable mode CUDAPluggableAllocator's
// raw_delete calls umem_torch_pluggable_free (enabling.cpp:155). Both call bridge::deallocate
// (bridge.cpp:366): a block of the device's sole stream goes straight back to the allocator;
// others wait in the stream-ordered cache, cache_->deallocate (bridge.cpp:366, Note
// [Stream-ordered reuse] in umem_torch.h), until their streams' work is done, then
// bridge::released (bridge.cpp:186) hands them to allocator::deallocate (allocator.cpp:531),
// which returns them to their pool: an object of the calling thread's slabs, put_slab_object
// (caching_pool.hpp:264), else its bins, deallocate_block_cached_or (caching_pool.hpp:278), else
// caching_pool::deallocate_if_owned (caching_pool.cpp:525).
//
// Releases: one source for PyTorch 2.6 to 2.14 (Note [PyTorch releases] in torch_compat.hpp).
// Methods whose form changed between releases are declared in every form, without `override`;
// the calls to PyTorch's own allocator go through torch_compat.hpp's templates.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <torch/extension.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "memory_history.hpp"
#include "library_functions.hpp"
#include "pinned_memory_allocator.hpp"
#include "relaxed_capture.hpp"
#include "torch_compat.hpp"
#include "umem/umem_torch.h"
#if UMEM_TORCH_PLUGGABLE_HEADER
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>
#endif
#if defined(USE_ROCM) && !UMEM_TORCH_AT_LEAST(2, 11)
#include <ATen/hip/impl/HIPCachingAllocatorMasqueradingAsCUDA.h>
#endif

namespace {

namespace ue = umem_extension;
namespace cca = ue::cca;
using pool_id = ue::mempool_id;

using ue::fn;

std::string umem_message() { return fn.umem_torch_last_error(); }

void check(umem_status s, const char* what) {
  if (s == UMEM_ERR_OUT_OF_MEMORY)
    TORCH_CHECK_WITH(OutOfMemoryError, false, umem_message());
  TORCH_CHECK(s == UMEM_OK, "umem: ", what, " failed: ", umem_message());
}

// Events in PyTorch's own runtime for umem's stream-ordered reuse (umem_torch_event_provider).
void* event_create(int device) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  cudaEvent_t e = nullptr;
  if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return e;
}
void event_record(void* e, void* stream) {
  C10_CUDA_CHECK_WARN(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(stream)));
}
int event_query(void* e) {
  const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
  if (r == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return r == cudaErrorNotReady ? 0 : -static_cast<int>(r);
}
void event_synchronize(void* e) {
  C10_CUDA_CHECK_WARN(cudaEventSynchronize(static_cast<cudaEvent_t>(e)));
}
void event_destroy(void* e) { C10_CUDA_CHECK_WARN(cudaEventDestroy(static_cast<cudaEvent_t>(e))); }
const umem_torch_event_provider events{event_create, event_record, event_query,
                                       event_synchronize, event_destroy};

class umem_cuda_allocator;
umem_cuda_allocator* the_allocator = nullptr;  // PyTorch keeps it for the process's life

void delete_block(void* p);

class umem_cuda_allocator final : public cca::CUDAAllocator {
 public:
  explicit umem_cuda_allocator(cca::CUDAAllocator* native) : native_(native) {
#if UMEM_TORCH_PLUGGABLE_HEADER
    segments_ = torch::cuda::CUDAPluggableAllocator::createCustomAllocator(
        [](size_t size, int device, cudaStream_t) -> void* {
          void* p = nullptr;
          const c10::cuda::CUDAStreamCaptureModeGuard relaxed(cudaStreamCaptureModeRelaxed);
          return fn.umem_torch_segment_alloc(size, device, &p) == UMEM_OK ? p : nullptr;
        },
        [](void* p, size_t, int, cudaStream_t) {
          if (fn.umem_torch_segment_free(p) != UMEM_OK)
            TORCH_WARN("umem: freeing a pool segment failed: ", umem_message());
        });
#endif
  }

  // --- allocation ---------------------------------------------------------------------------
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = c10::cuda::current_device();
    const c10::Device where(c10::DeviceType::CUDA, device);
    if (n == 0) return {nullptr, nullptr, &delete_block, where};
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    void* p = routed(device, stream) ? native_alloc(n, device, stream)
                                     : umem_alloc(n, device, stream);
    return {p, p, &delete_block, where};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
  }
  void* raw_alloc(size_t n) override {
    const c10::DeviceIndex device = c10::cuda::current_device();
    return raw_alloc_with_stream(n, c10::cuda::getCurrentCUDAStream(device).stream());
  }
  void* raw_alloc_with_stream(size_t n, cudaStream_t stream) override {
    if (n == 0) return nullptr;
    const c10::DeviceIndex device = c10::cuda::current_device();
    return routed(device, stream) ? native_alloc(n, device, stream)
                                  : umem_alloc(n, device, stream);
  }
  void raw_delete(void* p) override { free(p); }

  void free(void* p) {
    if (p == nullptr) return;
    umem_status s;
    {
      const ue::relaxed_capture relaxed(capturing());
      s = fn.umem_torch_extension_release(p);  // one lookup: umem's blocks are the common case
    }
    if (s == UMEM_OK) {
      history_.freed(p);
    } else if (s == UMEM_ERR_NOT_FOUND) {
      native_->raw_delete(p);
      note_native_reserved(c10::cuda::current_device());
    } else {
      TORCH_WARN("umem: free failed: ", umem_message());
    }
  }

  void recordStream(const c10::DataPtr& ptr, ue::allocator_stream stream) override {
    void* p = ptr.get();
    if (p == nullptr) return;
    if (fn.umem_torch_owns(p) != 0) {
      check(fn.umem_torch_record_stream(p, stream.stream()), "record_stream");
      return;
    }
    // PyTorch's allocator only honours its own deleter: hand it the pointer the way it made it.
    c10::DataPtr theirs(p, p, native_->raw_deleter(), ptr.device());
    native_->recordStream(theirs, stream);
    (void)theirs.release_context();
  }

  // --- statistics and cache -----------------------------------------------------------------
  cca::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    cca::DeviceStats s = native_->getDeviceStats(device);
    umem_torch_device_stats u{};
    check(fn.umem_torch_get_device_stats(device, &u), "statistics");
    for (std::size_t c = 0; c < 3; ++c) {
      ue::add_stat(s.allocation[c], u.allocation[c]);
      ue::add_stat(s.segment[c], u.segment[c]);
      ue::add_stat(s.active[c], u.active[c]);
      ue::add_stat(s.allocated_bytes[c], u.allocated_bytes[c]);
      ue::add_stat(s.reserved_bytes[c], u.reserved_bytes[c]);
      ue::add_stat(s.active_bytes[c], u.active_bytes[c]);
      ue::add_stat(s.requested_bytes[c], u.requested_bytes[c]);
    }
    s.num_alloc_retries += u.num_alloc_retries;
    s.num_ooms += u.num_ooms;
    s.num_device_alloc += u.num_device_alloc;
    s.num_device_free += u.num_device_free;
    return s;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    native_->resetAccumulatedStats(device);
    check(fn.umem_torch_reset_accumulated_stats(device), "reset_accumulated_memory_stats");
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    native_->resetPeakStats(device);
    check(fn.umem_torch_reset_peak_stats(device), "reset_peak_memory_stats");
  }
  // PyTorch >= 2.8's form, then 2.6's (Note [PyTorch releases]).
  void emptyCache(pool_id id) { empty_cache(id); }
  void emptyCache() { empty_cache({0, 0}); }
  void empty_cache(pool_id mempool_id) {
    // Like PyTorch's: the default pool is released only while no pool routing is active, and
    // releasing waits for the events of blocks still used by streams, not for whole devices.
    // PyTorch's first: the pool segments it releases go back to umem, whose trim then frees them.
    ue::empty_cache(*native_, mempool_id);
    if (mempool_id.first == 0 && mempool_id.second == 0 && routes_.load() == 0)
      check(fn.umem_torch_empty_cache(0, nullptr), "empty_cache");
    for (c10::DeviceIndex d = 0; d < c10::cuda::device_count(); ++d) note_native_reserved(d);
  }
  void cacheInfo(c10::DeviceIndex device, size_t* largest) override {
    native_->cacheInfo(device, largest);
  }
  // An override where c10::DeviceAllocator declares it (2.9 on).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) {
    size_t free_bytes = 0, total = 0;
    check(fn.umem_torch_mem_get_info(device, &free_bytes, &total), "mem_get_info");
    return {free_bytes, total};
  }
  double getMemoryFraction(c10::DeviceIndex device) override {
    double f = 1.0;
    check(fn.umem_torch_get_memory_fraction(device, &f), "get_per_process_memory_fraction");
    return f;
  }
  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    native_->setMemoryFraction(fraction, device);
    check(fn.umem_torch_set_memory_fraction(fraction, device), "set_per_process_memory_fraction");
  }

  // Every release's form (Note [PyTorch releases]).
  cca::SnapshotInfo snapshot(pool_id id, bool include_traces) { return take_snapshot(id, include_traces); }
  cca::SnapshotInfo snapshot(pool_id id) { return take_snapshot(id, true); }
  cca::SnapshotInfo snapshot() { return take_snapshot({0, 0}, true); }
  cca::SnapshotInfo take_snapshot(pool_id mempool_id, bool include_traces) {
    cca::SnapshotInfo info = ue::snapshot(*native_, mempool_id, include_traces);
    if (mempool_id.first != 0 || mempool_id.second != 0) return info;
    for (c10::DeviceIndex d = 0; d < c10::cuda::device_count(); ++d) {
      struct visit_ctx {
        c10::DeviceIndex device;
        std::vector<cca::SegmentInfo>* out;
        const umem_extension::memory_history* history;
      } ctx{d, &info.segments, &history_};
      check(fn.umem_torch_visit_segments(
                d,
                [](void* c, const umem_torch_segment_info* s) {
                  auto* v = static_cast<visit_ctx*>(c);
                  cca::SegmentInfo seg;
                  seg.device = v->device;
                  seg.address = s->address;
                  seg.total_size = s->size;
                  seg.is_large = s->is_large != 0;
                  std::size_t address = s->address;
                  for (size_t i = 0; i < s->block_count; ++i) {
                    const umem_torch_block_info& b = s->blocks[i];
                    cca::BlockInfo block;
                    block.size = b.size;
                    block.requested_size = b.requested;
                    block.allocated = b.allocated != 0;
                    block.active = b.active != 0;
                    if (block.allocated) {
                      seg.allocated_size += b.size;
                      block.context_when_allocated = v->history->context_of(address);
                    }
                    if (block.active) seg.active_size += b.size;
                    seg.requested_size += b.requested;
                    seg.blocks.push_back(std::move(block));
                    address += b.size;
                  }
                  v->out->push_back(std::move(seg));
                },
                &ctx),
            "memory_snapshot");
    }
    if (include_traces) history_.add_traces(info.device_traces);
    return info;
  }

  // --- private pools: PyTorch's own allocator (Note [Two allocators, one interface]) ----------
  void beginAllocateToPool(c10::DeviceIndex device, pool_id mempool_id,
                           std::function<bool(cudaStream_t)> filter) override {
    // A pool PyTorch's allocator would create here (a graph capture's own) gets umem's segments
    // where the release can take them: created with them first, the routing's reference taken
    // by beginAllocateToPool itself.
    const bool fresh = add_pool_reference(device, mempool_id);
    if (fresh) ue::create_or_incref_pool(*native_, device, mempool_id, segments_);
    native_->beginAllocateToPool(device, mempool_id, filter);
    if (fresh) native_->releasePool(device, mempool_id);
    {
      std::lock_guard lock(routes_mutex_);
      routing_.push_back(route{device, mempool_id, std::move(filter)});
      routes_.store(static_cast<int>(routing_.size()));
    }
    fn.umem_torch_capture_begin();
  }
  void endAllocateToPool(c10::DeviceIndex device, pool_id mempool_id) override {
    native_->endAllocateToPool(device, mempool_id);
    {
      std::lock_guard lock(routes_mutex_);
      for (auto it = routing_.begin(); it != routing_.end(); ++it)
        if (it->device == device && it->id == mempool_id) {
          routing_.erase(it);
          break;
        }
      routes_.store(static_cast<int>(routing_.size()));
    }
    fn.umem_torch_capture_end();
  }
  // The form with an allocator (2.11 [inferred from PR 171962's date] on), then 2.6's.
  void createOrIncrefPool(c10::DeviceIndex device, pool_id mempool_id,
                          ue::allocator_ptr allocator) {
    const bool fresh = add_pool_reference(device, mempool_id);
    ue::create_or_incref_pool(*native_, device, mempool_id,
                              allocator || !fresh ? std::move(allocator) : segments_);
  }
  void ensureExistsAndIncrefPool(c10::DeviceIndex device, pool_id mempool_id) {
    createOrIncrefPool(device, mempool_id, nullptr);
  }
  void releasePool(c10::DeviceIndex device, pool_id mempool_id) override {
    native_->releasePool(device, mempool_id);
    std::lock_guard lock(routes_mutex_);
    auto it = pool_references_.find({device, mempool_id});
    if (it != pool_references_.end() && --it->second == 0) {
      pool_references_.erase(it);
      use_on_oom_.erase({device, mempool_id});
    }
  }
  int getPoolUseCount(c10::DeviceIndex device, pool_id mempool_id) override {
    return native_->getPoolUseCount(device, mempool_id);
  }
  // The form with a flag, then the one that only turns it on; 2.6 has neither.
  void setUseOnOOM(c10::DeviceIndex device, pool_id id) { setUseOnOOM(device, id, true); }
  void setUseOnOOM(c10::DeviceIndex device, pool_id mempool_id, bool use_on_oom) {
    ue::set_use_on_oom(*native_, device, mempool_id, use_on_oom);
    std::lock_guard lock(routes_mutex_);
    if (use_on_oom)
      use_on_oom_.insert({device, mempool_id});
    else
      use_on_oom_.erase({device, mempool_id});
  }
  void setNoSplit(c10::DeviceIndex device, pool_id mempool_id) {
    ue::set_no_split(*native_, device, mempool_id);
  }
  bool checkPoolLiveAllocations(c10::DeviceIndex device, pool_id mempool_id,
                                const std::unordered_set<void*>& expected) override {
    return native_->checkPoolLiveAllocations(device, mempool_id, expected);
  }
  std::shared_ptr<cca::AllocatorState> getCheckpointState(c10::DeviceIndex device,
                                                          pool_id id) override {
    return native_->getCheckpointState(device, id);
  }
  cca::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex device,
                                              std::shared_ptr<cca::AllocatorState> pps) override {
    cca::CheckpointDelta delta = native_->setCheckpointPoolState(device, std::move(pps));
    // The new blocks are PyTorch's; give them this allocator's deleter like every other.
    for (c10::DataPtr& d : delta.dataptrs_allocd) {
      void* p = d.release_context();
      d = c10::DataPtr(p, p, &delete_block, d.device());
    }
    return delta;
  }

  // --- the rest is PyTorch's allocator's --------------------------------------------------------
  void init(int device_count) override { native_->init(device_count); }
  bool initialized() override { return native_->initialized(); }
  void enable(bool value) override { native_->enable(value); }
  bool isEnabled() const override { return native_->isEnabled(); }
  ue::segment_sizes getExpandableSegmentSizes(c10::DeviceIndex device) {
    return ue::expandable_segment_sizes(*native_, device);
  }
  void* getBaseAllocation(void* ptr, size_t* size) override {
    TORCH_CHECK(fn.umem_torch_owns(ptr) == 0, not_shareable());
    return native_->getBaseAllocation(ptr, size);
  }
  cca::ShareableHandle shareIpcHandle(void* ptr) override {
    TORCH_CHECK(fn.umem_torch_owns(ptr) == 0, not_shareable());
    return native_->shareIpcHandle(ptr);
  }
  std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
    return native_->getIpcDevPtr(std::move(handle));
  }
  bool isHistoryEnabled() override { return history_.enabled() || native_->isHistoryEnabled(); }
  // Every release's form, newest first.
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                     size_t alloc_trace_max_entries, cca::RecordContext when, bool clear_history,
                     const std::vector<std::string>& skip_actions) {
    // Note [Memory history] in memory_history.hpp: umem's blocks here, the private pools there.
    history_.configure(enabled, context_recorder, alloc_trace_max_entries, when, clear_history,
                       skip_actions);
    ue::record_history(*native_, enabled, context_recorder, alloc_trace_max_entries, when,
                       clear_history, skip_actions);
  }
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                     size_t alloc_trace_max_entries, cca::RecordContext when, bool clear_history) {
    recordHistory(enabled, context_recorder, alloc_trace_max_entries, when, clear_history, {});
  }
  void recordHistory(bool enabled, cca::CreateContextFn context_recorder,
                     size_t alloc_trace_max_entries, cca::RecordContext when) {
    recordHistory(enabled, context_recorder, alloc_trace_max_entries, when, false, {});
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    native_->recordAnnotation(md);
  }
  void pushCompileContext(std::string& md) { ue::push_compile_context(*native_, md); }
  void popCompileContext() { ue::pop_compile_context(*native_); }
  void setUserMetadata(const std::string& metadata) { ue::set_user_metadata(*native_, metadata); }
  std::string getUserMetadata() { return ue::user_metadata(*native_); }
  void attachOutOfMemoryObserver(cca::OutOfMemoryObserver observer) override {
    {
      std::lock_guard lock(routes_mutex_);
      oom_observers_.push_back(observer);
    }
    native_->attachOutOfMemoryObserver(std::move(observer));
  }
  // Pure virtual from 2.12 [inferred; absent in 2.11, present in 2.14.1]: PyTorch's allocator
  // tells these observers of requests it refuses before trying (throw_on_cudamalloc_oom); umem
  // refuses none that way, so they hear only of PyTorch's private pools.
  void attachOomRejectionObserver(ue::oom_rejection_observer observer) {
    ue::attach_oom_rejection_observer(*native_, std::move(observer));
  }
  void attachAllocatorTraceTracker(cca::AllocatorTraceTracker tracker) override {
    native_->attachAllocatorTraceTracker(std::move(tracker));
  }
  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override {
    native_->enablePeerAccess(dev, dev_to_access);
  }
  cudaError_t memcpyAsync(void* dst, int dst_device, const void* src, int src_device,
                          size_t count, cudaStream_t stream, bool p2p_enabled) override {
    return native_->memcpyAsync(dst, dst_device, src, src_device, count, stream, p2p_enabled);
  }
  std::string name() override { return "umem"; }

 private:
  struct route {
    c10::DeviceIndex device;
    pool_id id;
    std::function<bool(cudaStream_t)> filter;
  };

  static std::string not_shareable() {
    return "umem: this tensor's memory comes from umem's allocator, which PyTorch cannot share "
           "with another process through CUDA IPC; allocate tensors to be shared before "
           "umem.torch.enable(), or inside torch.cuda.use_mem_pool(torch.cuda.MemPool())";
  }

  // Whether a private pool takes allocations of `stream` now (Note [Two allocators, one
  // interface]); the first matching routing wins, as in PyTorch's allocator.
  bool routed(c10::DeviceIndex device, cudaStream_t stream) {
    if (routes_.load(std::memory_order_acquire) == 0) return false;
    std::lock_guard lock(routes_mutex_);
    for (const route& r : routing_)
      if (r.device == device && r.filter(stream)) return true;
    return false;
  }

  bool capturing() const { return routes_.load(std::memory_order_acquire) != 0; }

  // Mirrors the use count of PyTorch's private pools (its getPoolUseCount asserts that the pool
  // exists): true when `id` had no reference, so PyTorch's allocator is about to create it.
  bool add_pool_reference(c10::DeviceIndex device, pool_id id) {
    std::lock_guard lock(routes_mutex_);
    return pool_references_[{device, id}]++ == 0;
  }

  // Tells umem what PyTorch's allocator holds on `device` (umem_torch_set_external_reserved),
  // after every call that may have changed it; only pool and fallback paths call it.
  void note_native_reserved(c10::DeviceIndex device) {
    const cca::DeviceStats s = native_->getDeviceStats(device);
    const auto reserved = s.reserved_bytes[0].current;  // StatType::AGGREGATE, 0 in every release
    (void)fn.umem_torch_set_external_reserved(device, static_cast<uint64_t>(reserved));
  }

  void* native_alloc(size_t n, c10::DeviceIndex device, cudaStream_t stream) {
    void* p = native_->raw_alloc_with_stream(n, stream);
    note_native_reserved(device);
    return p;
  }

  // PyTorch's allocator lends the free blocks of use_on_oom pools only once it cannot reserve
  // more itself; its own default pool would otherwise take the device memory umem was refused
  // (its memory fraction knows nothing of umem's). A fraction of 0 for the call makes it go
  // straight to those pools; the caller's fraction is put back after. Concurrent allocations of
  // PyTorch's private pools on other threads may see the 0 and fail for that moment.
  void* use_on_oom_alloc(size_t n, c10::DeviceIndex device, cudaStream_t stream) {
    std::lock_guard lock(use_on_oom_mutex_);
    double fraction = 1.0;
    check(fn.umem_torch_get_memory_fraction(device, &fraction), "get_per_process_memory_fraction");
    native_->setMemoryFraction(0.0, device);
    struct restore {
      cca::CUDAAllocator* native;
      double fraction;
      c10::DeviceIndex device;
      ~restore() { native->setMemoryFraction(fraction, device); }
    } put_back{native_, fraction, device};
    return native_alloc(n, device, stream);
  }

  bool has_use_on_oom_pool(c10::DeviceIndex device) {
    std::lock_guard lock(routes_mutex_);
    for (const auto& [d, id] : use_on_oom_)
      if (d == device) return true;
    return false;
  }

  void* umem_alloc(size_t n, c10::DeviceIndex device, cudaStream_t stream) {
    void* p = nullptr;
    umem_status s;
    {
      const ue::relaxed_capture relaxed(capturing());
      s = fn.umem_torch_extension_alloc(n, device, stream, &p);
    }
    if (s == UMEM_ERR_OUT_OF_MEMORY) {
      const std::string message = umem_message();
      std::vector<cca::OutOfMemoryObserver> observers;
      {
        std::lock_guard lock(routes_mutex_);
        observers = oom_observers_;
      }
      // MemPools made with use_on_oom lend their free blocks when the device is full, as in
      // PyTorch: its allocator's out-of-memory path tries them (and fails as umem did otherwise).
      if (has_use_on_oom_pool(device)) {
        try {
          return use_on_oom_alloc(n, device, stream);
        } catch (const c10::OutOfMemoryError&) {
        }
      }
      size_t free_bytes = 0, total = 0;
      if (!observers.empty() || history_.enabled())
        (void)fn.umem_torch_mem_get_info(device, &free_bytes, &total);
      history_.out_of_memory(device, n, free_bytes, stream);
      for (const auto& o : observers) o(device, n, total, free_bytes);
      TORCH_CHECK_WITH(OutOfMemoryError, false, message);
    }
    check(s, "allocation");
    history_.allocated(device, p, n, stream);
    return p;
  }

  cca::CUDAAllocator* native_;
  std::shared_ptr<cca::CUDAAllocator> segments_;  // umem memory for PyTorch's private pools
  std::mutex routes_mutex_;                       // guards routing_ and oom_observers_
  std::vector<route> routing_;
  std::atomic<int> routes_{0};  // routing_.size(), read without the lock
  std::vector<cca::OutOfMemoryObserver> oom_observers_;
  std::map<std::pair<c10::DeviceIndex, pool_id>, int> pool_references_;
  std::set<std::pair<c10::DeviceIndex, pool_id>> use_on_oom_;
  std::mutex use_on_oom_mutex_;  // one use_on_oom_alloc at a time
  ue::memory_history history_;
};

void delete_block(void* p) { the_allocator->free(p); }

// Takes libumem_torch.so's functions {name: address} and sets umem's event provider; raises
// naming any function missing from the table.
void install(const pybind11::dict& functions) {
  TORCH_CHECK(the_allocator == nullptr, "umem: the allocator extension is installed already");
  ue::take_library_functions(functions, "allocator extension");
}

// Umem's event provider in PyTorch's runtime; UMEM_ERR_ALREADY_INITIALIZED when umem's bridge
// already exists (then the GPU backend's own events serve, where it has them).
int set_event_provider() { return fn.umem_torch_set_event_provider(&events); }

// After torch.cuda.memory.change_current_allocator: makes umem the CUDA entry of c10's allocator
// registry too, which torch.accelerator's memory functions ask; false if that did not take.
bool register_device_allocator() {
  TORCH_CHECK(the_allocator != nullptr, "umem: make_allocator() first");
  c10::SetAllocator(c10::DeviceType::CUDA, the_allocator, UINT8_MAX);
  return c10::GetAllocator(c10::DeviceType::CUDA) == the_allocator;
}

// Whether the allocator PyTorch's CUDA (HIP) tensors come from is umem's, asked of the accessor
// at::empty uses; its deleter is umem's only then. That is cca::get(), except on ROCm up to 2.10,
// where ATen allocates through HIPCachingAllocatorMasqueradingAsCUDA::get(), whose wrapper keeps
// the allocator it saw on its first call (aten/src/ATen/hip/impl/
// HIPCachingAllocatorMasqueradingAsCUDA.cpp), so a swap after anything asked for it is not in
// force; hipify v2 (PR 174087, 2.11) makes its get() read the current allocator.
bool in_force() {
#if defined(USE_ROCM) && !UMEM_TORCH_AT_LEAST(2, 11)
  c10::Allocator* current = c10::hip::HIPCachingAllocatorMasqueradingAsCUDA::get();
#else
  c10::Allocator* current = cca::get();
#endif
  return current != nullptr && current->raw_deleter() == &delete_block;
}

std::shared_ptr<cca::CUDAAllocator> make_allocator() {
  TORCH_CHECK(fn.umem_torch_extension_alloc != nullptr,
              "umem: install() the library's functions first");
  TORCH_CHECK(the_allocator == nullptr, "umem: the allocator exists already");
  auto a = std::make_shared<umem_cuda_allocator>(cca::get());
  the_allocator = a.get();
  return a;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "umem's CUDA/HIP allocator for PyTorch (docs/torch-bridge.md)";
  m.def("install", &install, "take libumem_torch.so's functions {name: address}");
  m.def("set_event_provider", &set_event_provider, "umem's stream events in PyTorch's runtime");
  m.def("make_allocator", &make_allocator,
        "the allocator, for torch.cuda.memory.change_current_allocator");
  m.def("register_device_allocator", &register_device_allocator,
        "umem as c10's CUDA allocator too (torch.accelerator), once it is PyTorch's");
  m.def("in_force", &in_force, "whether the allocator PyTorch's tensors get is umem's");
  m.def("set_pinned_allocator", &ue::set_pinned_allocator,
        "umem as PyTorch's pinned-memory allocator where the release has a setter (2.8+); whether "
        "it is in force");
  m.def("lacking", &ue::lacking, "what this PyTorch's allocator interface cannot do");
}
