// Blocks PyTorch freed on a stream, held until every stream may use them (Note [Stream-ordered
// reuse] in umem_torch.h). Sits between the torch allocator hooks and the umem allocator: a free
// lands here, a malloc first asks here for a block freed on its own stream, and blocks whose
// event has completed are released to the umem pool, where any stream may get them.
//
// Thread safety: all member functions may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "umem/allocator/stream_event.hpp"

namespace umem::torch_bridge {

// Makes an event for streams of `device`; returns null where the backend has none (then blocks
// wait for a synchronized release_all).
using event_factory = std::function<std::unique_ptr<alloc::stream_event>(int device)>;

class stream_ordered_cache {
 public:
  // `release` returns a block to the umem pool; it must not call back into this cache.
  stream_ordered_cache(event_factory events, std::function<void(void*)> release);
  ~stream_ordered_cache();
  stream_ordered_cache(const stream_ordered_cache&) = delete;
  stream_ordered_cache& operator=(const stream_ordered_cache&) = delete;

  // `p` (usable size `size`) was freed on `stream` of `device`: released at once when its event
  // has already completed (no GPU), else kept. Throws what the event throws (then `p` is kept
  // for a synchronized release_all).
  void deallocate(void* p, std::size_t size, int device, void* stream);
  // The smallest block freed on the same (device, stream) that fits `size` without wasting more
  // than half of it; null if none. Ownership passes to the caller.
  std::pair<void*, std::size_t> reuse(std::size_t size, int device, void* stream);
  // Releases the blocks whose events have completed, per stream in free order; bytes released.
  std::size_t release_completed();
  // Releases every block: waits for each event when `synchronized` is false; when true the caller
  // asserts all GPU work is done (blocks without events go too). Bytes released.
  std::size_t release_all(bool synchronized);
  // Bytes held for `device` (-1: all devices).
  std::size_t held_bytes(int device) const;

 private:
  struct held {
    void* p = nullptr;
    std::size_t size = 0;
    std::unique_ptr<alloc::stream_event> event;  // null: no event (waits for release_all(true))
  };
  using stream_key = std::pair<int, void*>;  // device, stream
  struct stream_blocks {
    std::list<held> in_free_order;
    std::multimap<std::size_t, std::list<held>::iterator> by_size;
  };

  std::unique_ptr<alloc::stream_event> take_event(int device);
  void recycle_event(int device, std::unique_ptr<alloc::stream_event> e);
  std::size_t release_front(stream_blocks& s, int device, bool all, bool wait);

  event_factory events_;
  std::function<void(void*)> release_;
  mutable std::mutex mutex_;
  std::map<stream_key, stream_blocks> streams_;
  std::map<int, std::vector<std::unique_ptr<alloc::stream_event>>> spare_events_;
};

}  // namespace umem::torch_bridge
