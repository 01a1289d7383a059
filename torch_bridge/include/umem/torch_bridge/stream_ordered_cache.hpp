// Blocks PyTorch freed on a stream, held until every stream may use them (Note [Stream-ordered
// reuse] in umem_torch.h). Sits between the torch allocator hooks and the umem allocator: a free
// lands here, a malloc first asks here for a block freed on its own stream, and blocks whose
// events have completed are released to the umem pool, where any stream may get them.
//
// Note [Lazy stream fences]
// A block used on its own stream only records nothing when it is freed: the free costs no driver
// call, and the block is at once reusable by that stream. Only when blocks must move on (a
// malloc that nothing held fits calls release_completed) is one event, a "fence", recorded on
// each stream that freed blocks since its last fence: it covers every one of them, because they
// were freed after all the work that used them had been queued. A stream keeps at most
// max_fences pending; blocks freed after the newest one wait for a later fence. PyTorch's caching
// allocator records no event for such blocks either; it keeps them with their stream for good.
//
// Note [Blocks used on several streams]
// A block that PyTorch was told is used on other streams (Tensor.record_stream) may be reused by
// no stream, its own included, before the work queued on every one of those streams at the free
// has completed: the free records one event per stream, and the block goes back to the pool only
// when all of them have completed (PyTorch's caching allocator does the same).
//
// Note [Frees during graph capture]
// While a CUDA/HIP graph is being captured, event queries are illegal and an event recorded on a
// capturing stream becomes a node of the graph, so a free then records nothing: the block is kept
// "deferred" (still reusable by its own stream, whose order makes that safe) until arm_deferred()
// records its events once no capture is underway.
//
// Thread safety: none of its own. The owner serializes every call (the torch bridge holds its
// mutex around each, so one PyTorch malloc or free takes one lock, Note [One lock] in bridge.hpp),
// and `release` runs inside those calls, under the owner's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "umem/machine/stream_event.hpp"

namespace umem::torch_bridge {

// Makes an event for streams of `device`; returns null where the backend has none (then blocks
// wait for a synchronized release_all).
using event_factory = std::function<std::unique_ptr<machine::stream_event>(int device)>;

// A block in the cache; `size` is what reuse() compares requests with (the bridge: the size it
// reports to PyTorch, never more than the block's usable size).
struct held_block {
  void* p = nullptr;
  std::size_t size = 0;
  int device = 0;  // whose streams' events it waits for
  bool host = false;  // a CPU tensor's block (Note [Host blocks in flight] in bridge.hpp)
};

class stream_ordered_cache {
 public:
  // `release` returns a block to the umem pool; `shared` says it was used on several streams
  // (it never went back to its stream's reuse). It must not call back into this cache.
  using release_fn = std::function<void(const held_block& b, bool shared)>;
  stream_ordered_cache(event_factory events, release_fn release);
  ~stream_ordered_cache();
  stream_ordered_cache(const stream_ordered_cache&) = delete;
  stream_ordered_cache& operator=(const stream_ordered_cache&) = delete;

  // `b` was freed on `stream`, and used on `uses` too (Note [Blocks used on several streams]):
  // kept. A block used on `stream` only records nothing (Note [Lazy stream fences]); one used
  // elsewhere records its events now, and is released at once when they have already completed,
  // unless `defer`: a graph capture is underway (Note [Frees during graph capture]). Throws what
  // an event throws (then the block is kept for a synchronized release_all).
  void deallocate(const held_block& b, void* stream, std::span<void* const> uses, bool defer);
  // The smallest block freed on the same (device, stream), used on no other stream, that fits
  // `size` without wasting more than half of it. Ownership passes to the caller.
  std::optional<held_block> reuse(std::size_t size, int device, void* stream);
  // Records the fences due (Note [Lazy stream fences]) and releases the blocks whose events have
  // completed; bytes released. Never call it while a graph capture is underway (it records and
  // queries events).
  std::size_t release_completed();
  // Releases every block: waits for each event when `synchronized` is false; when true the caller
  // asserts all GPU work is done (blocks without events go too). Bytes released.
  std::size_t release_all(bool synchronized);
  // Records the events of blocks freed during a capture (Note [Frees during graph capture]) and
  // the fences due.
  void arm_deferred();
  // Bytes held for `device` (-1: all devices).
  std::size_t held_bytes(int device) const;
  // Whether nothing is held and no fence is pending (then release_completed has nothing to do).
  bool empty() const { return streams_.empty() && shared_.empty(); }
  // Records an event on `stream` and waits for it: the work queued there so far has completed.
  // False where `device` has no events. Never call it while a graph capture is underway.
  bool wait_for_stream(int device, void* stream);

  static constexpr std::size_t max_fences = 8;  // pending fences per stream

 private:
  struct held {
    held_block b;
    void* stream = nullptr;
    std::vector<void*> uses;  // other streams; events are recorded on stream and each of them
    // Empty: none recorded (deferred, or the backend has none: waits for release_all(true)).
    std::vector<std::unique_ptr<machine::stream_event>> events;
    bool deferred = false;
    std::uint64_t seq = 0;  // order of the free on its stream (Note [Lazy stream fences])
  };
  using stream_key = std::pair<int, void*>;  // device, stream
  struct fence {
    std::uint64_t covers = 0;  // blocks with seq < covers were freed before it was recorded
    std::unique_ptr<machine::stream_event> event;
  };
  // Blocks used on their own stream only, and the fences that cover them, both in free order.
  // by_size is keyed by (size, seq): reuse() finds the smallest fit, oldest first, and a block
  // released from the front is erased by its key rather than searched for among the blocks of
  // its size and larger (the search usually stopped at once, the front block being the oldest of
  // its size; bench/torch_bridge measured no difference on the real traces).
  using size_index = std::map<std::pair<std::size_t, std::uint64_t>, std::list<held>::iterator>;
  struct stream_blocks {
    std::list<held> in_free_order;
    size_index by_size;
    std::deque<fence> fences;    // recorded, not yet seen complete, oldest first
    std::uint64_t next_seq = 0;  // seq of the next free
    std::uint64_t fenced = 0;    // blocks with seq < fenced are covered by a recorded fence
    std::uint64_t done = 0;      // blocks with seq < done: their stream passed a fence
  };

  std::unique_ptr<machine::stream_event> take_event(int device);
  void recycle_events(held& h);
  // Records an event on h.stream and each of h.uses; false when the backend has no events.
  bool record_events(held& h);
  bool completed(held& h, bool wait);
  // Records a fence on `stream` when blocks wait for one and fewer than max_fences are pending.
  void fence_stream(const stream_key& key, stream_blocks& s);
  // Retires the completed fences (waits for each when `wait`).
  void retire_fences(int device, stream_blocks& s, bool wait);
  std::size_t release_front(const stream_key& key, stream_blocks& s, bool all, bool wait);
  // Nothing held and no fence pending: the stream is forgotten (its next free starts afresh).
  static bool drained(const stream_blocks& s);
  std::size_t release_shared(bool all, bool wait);
  void release(held& h);
  // Takes `it`, indexed by `key`, out of s.
  void forget(stream_blocks& s, std::list<held>::iterator it, size_index::iterator key);

  event_factory events_;
  release_fn release_;
  std::map<stream_key, stream_blocks> streams_;
  std::list<held> shared_;  // blocks used on several streams (any device)
  std::map<int, std::vector<std::unique_ptr<machine::stream_event>>> spare_events_;
};

}  // namespace umem::torch_bridge
