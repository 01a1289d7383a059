// What an allocation that runs out of memory does, once, in one place.
//
// Note [Reclaim ladder]
// The bottom is caching_pool::try_allocate: the pool serves from its free blocks or with one
// upstream call that may run out (a growth in place or a new segment), and returns null with the
// reason (the limit it would pass, or the upstream's own words) instead of throwing. A failed
// request then climbs these rungs, in this order, each at most once:
//   1. thread caches: every pool's thread-cached blocks go back to their pools (Note [Fast path]
//      in caching_pool.hpp), which may make a block or a whole segment free;
//   2. stream blocks: the allocator's owner gives back blocks it holds for streams that have
//      finished with them (the torch bridge's stream-ordered cache: it waits for their events);
//   3. trim: free segments and free pages go back to the upstream (caching_pool::trim), which
//      makes room under a limit and at the upstream;
//   4. spill: other pools, nearest node first, per the spill policy (host memory only: device
//      memory never spills, Note [Device placements] in allocator.hpp).
// After a rung of 1-3 that gave back any byte, the request's pool is tried once more
// (num_alloc_retries); a rung that gave back nothing costs no attempt. So one failed request asks
// the upstream at most once per rung, and a failure that every rung leaves standing becomes
// exactly one out_of_memory (num_ooms of the request's pool counts it once), naming the request,
// the pool's node and kind, the limit or the upstream's reason, and the pool's statistics.
// Rungs 2 and 3 are skipped while the owner forbids them (a CUDA graph capture: PyTorch neither
// waits for events nor empties its cache then, since both synchronize). Before this ladder the
// retries were nested in the pool, the allocator and the bridge, so one failure could reach the
// upstream many times. caching_pool::allocate is the same ladder over one pool (rungs 1 and 3);
// allocator::allocate climbs all four.
//
// Thread safety: climb() holds no lock; the rungs take their own. A rung must not throw
// out_of_memory (it reports what it gave back), and an attempt reports running out as null.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "umem/allocator/reclaim_report.hpp"

namespace umem::alloc {

// One try-allocate: the memory, or why it was not there.
struct attempt_result {
  void* p = nullptr;
  std::string why;
};

struct reclaim_rungs {
  std::function<attempt_result()> attempt;  // the request's pool; required
  // Each returns the bytes it gave back; an empty one is skipped.
  std::function<std::size_t()> thread_caches, stream_blocks, trim;
  std::function<attempt_result()> spill;  // empty: the request never spills
  std::function<void()> retried;          // called before each retry (counts it)
};

// Climbs the ladder (Note [Reclaim ladder]): the memory, or null with why the last attempt
// failed and what the ladder tried. Throws only what the attempts and rungs throw.
attempt_result climb(const reclaim_rungs& rungs, reclaim_report& report);
// The same after a first attempt that failed with `first` (null p): the rungs, then the spill.
// For callers that make the first attempt themselves, so that a request served at once builds
// no rungs (their std::function objects cost a heap call or more on every allocation).
attempt_result climb_after(attempt_result first, const reclaim_rungs& rungs,
                           reclaim_report& report);

}  // namespace umem::alloc
