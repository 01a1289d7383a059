// The private pools of umem's pinned-memory allocator during CUDA (HIP) graph captures.
//
// Note [Pinned memory in graph captures]
// Where at::HostAllocator declares begin_allocate_to_pool, end_allocate_to_pool and release_pool
// (ATen/core/CachingHostAllocator.h; their defaults throw "Not implemented"), CUDAGraph's
// capture_begin, capture_end and reset call them for the graph's memory pool, so a host allocator
// without them fails every capture. A capture's pinned memory (a non_blocking copy's staging
// buffer, a tensor pinned inside the captured code) is read or written again at every replay, so
// PyTorch's CachingHostAllocator gives what a capturing stream allocates to the graph's private
// pool and reuses it only inside that pool until the last graph using the pool releases it.
// umem keeps the same promise more simply: a block allocated while a capture's filter accepts the
// current stream belongs to that capture's pool; if it is freed while a graph still holds the
// pool it is kept, not reused at all, and the pool's release frees the blocks it kept (a block
// still live then is freed when its tensor goes). The price: a capture that frees and allocates
// pinned memory again takes new blocks where PyTorch would reuse its pool's.
// Thread-safe; the allocator's fast paths read two atomics and take the mutex only while a
// capture is underway (allocation) or a pool exists (free).
#pragma once

#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace umem_extension {

class pinned_graph_pools {
 public:
  // c10::MempoolId_t (a pair of CaptureId_t), spelled out so that this header needs c10's core
  // only (tests/python/test_pinned_graph_pools.py builds it against CPU-only PyTorch).
  using pool_id = std::pair<unsigned long long, unsigned long long>;
  using filter = std::function<bool(c10::Stream)>;

  // CUDAGraph::capture_begin: allocations on streams `accepts` accepts go to pool `id` (created,
  // or one more graph using it).
  void begin(pool_id id, filter accepts) {
    std::lock_guard lock(mutex_);
    const bool recording = std::any_of(captures_.begin(), captures_.end(),
                                       [&](const auto& c) { return c.first == id; });
    TORCH_CHECK(!recording, "umem pinned-memory allocator: a capture already allocates to pool (",
                id.first, ",", id.second, ")");
    ++pools_[id].users;
    captures_.emplace_back(id, std::move(accepts));
    capturing_.store(true, std::memory_order_release);
    pools_exist_.store(true, std::memory_order_release);
  }

  // CUDAGraph::capture_end: allocations no longer go to pool `id`.
  void end(pool_id id) {
    std::lock_guard lock(mutex_);
    const auto it = std::find_if(captures_.begin(), captures_.end(),
                                 [&](const auto& c) { return c.first == id; });
    TORCH_CHECK(it != captures_.end(), "umem pinned-memory allocator: no capture allocates to pool (",
                id.first, ",", id.second, ")");
    captures_.erase(it);
    capturing_.store(!captures_.empty(), std::memory_order_release);
  }

  // A graph using pool `id` is gone; when it was the last, the blocks the pool kept, for the
  // caller to free (outside this object's lock).
  std::vector<void*> release(pool_id id) {
    std::lock_guard lock(mutex_);
    const auto it = pools_.find(id);
    TORCH_CHECK(it != pools_.end() && it->second.users > 0,
                "umem pinned-memory allocator: release of pool (", id.first, ",", id.second,
                "), which no graph uses");
    pool& p = it->second;
    if (--p.users > 0) return {};
    std::vector<void*> freed = std::move(p.kept);
    if (p.live == 0) erase(it);
    return freed;
  }

  // Whether a capture is underway (in any thread).
  bool capturing() const { return capturing_.load(std::memory_order_acquire); }

  // A block just allocated: it joins the pool of the first capture whose filter accepts
  // `current`, if one is underway.
  void adopt(void* block, c10::Stream current) {
    if (!capturing()) return;
    std::lock_guard lock(mutex_);
    for (const auto& [id, accepts] : captures_)
      if (accepts(current)) {
        owner_[block] = id;  // first: it may throw, and then nothing changed
        ++pools_.find(id)->second.live;  // the capture's pool exists until its last release
        return;
      }
  }

  // A block being freed: true when its pool keeps it (a graph still uses the pool); false when
  // the caller frees it as usual. Throws only std::bad_alloc, changing nothing.
  bool keep(void* block) {
    if (!pools_exist_.load(std::memory_order_acquire)) return false;
    std::lock_guard lock(mutex_);
    const auto owned = owner_.find(block);
    if (owned == owner_.end()) return false;
    const auto it = pools_.find(owned->second);
    pool& p = it->second;
    const bool kept = p.users > 0;
    if (kept) p.kept.push_back(block);  // first: it may throw
    owner_.erase(owned);
    if (--p.live == 0 && !kept) erase(it);
    return kept;
  }

 private:
  struct pool {
    int users = 0;           // graphs holding the pool (PyTorch's use_count)
    std::size_t live = 0;    // its blocks not freed yet
    std::vector<void*> kept;  // its blocks freed while graphs held it
  };
  using pool_map = std::map<pool_id, pool>;

  void erase(pool_map::iterator it) {
    pools_.erase(it);
    pools_exist_.store(!pools_.empty(), std::memory_order_release);
  }

  std::mutex mutex_;
  std::vector<std::pair<pool_id, filter>> captures_;
  pool_map pools_;
  std::unordered_map<void*, pool_id> owner_;  // live blocks of pools
  std::atomic<bool> capturing_{false};           // captures_ is not empty
  std::atomic<bool> pools_exist_{false};         // pools_ is not empty
};

}  // namespace umem_extension
