// A stream-ordered layer over a caching_pool, which has no notion of streams: a block freed on
// one stream is not handed to another stream before that stream's work is known complete.
//
// Note [Stream semantics]
// A free on stream s means: the block's last use was enqueued on s. The host sees the free at
// once, but s may still be running that use, so:
//  - with one stream in the whole trace every later use is ordered after the free: the block
//    goes straight back to the pool (what PyTorch's caching allocator does for its stream);
//  - with several streams it waits in s's pending list. An allocation on s may take a pending
//    block of s (stream order makes that safe) when it fits without wasting more than 1/8 of the
//    block; `e` on s (trace.hpp: s's prior work completed) returns all of s's pending blocks to
//    the pool, where any stream may get them.
// At the end of a replay pass synchronize_all() stands for the device synchronizing.
// Pending blocks still count as allocated in the pool: their memory is not reusable by others.
//
// Not thread-safe (the replay is single-threaded); the pool must outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "umem/allocator/detail/pool/caching_pool.hpp"

namespace umem::trace_replay {

class stream_ordered_pool {
 public:
  stream_ordered_pool(alloc::caching_pool& pool, bool multi_stream);

  void* allocate(std::size_t bytes, std::uint32_t stream);
  void deallocate(void* p, std::uint32_t stream);
  // `e` on `stream`.
  void synchronize(std::uint32_t stream);
  void synchronize_all();

  std::size_t pending_blocks() const;
  std::size_t pending_reuses() const { return pending_reuses_; }

 private:
  void release(std::multimap<std::size_t, void*>& pending);

  alloc::caching_pool& pool_;
  const bool multi_stream_;
  std::map<std::uint32_t, std::multimap<std::size_t, void*>> pending_;  // stream -> size -> block
  std::size_t pending_reuses_ = 0;
};

}  // namespace umem::trace_replay
