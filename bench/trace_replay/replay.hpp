// Replays a trace through umem's caching_pool (Note [Trace operations] in trace.hpp).
//
// Note [Passes and what is measured]
// The trace runs `passes` times on one pool, never trimmed in between: pass 1 starts from an
// empty pool (the cold start the recording allocator also had), later passes find the cache
// warm, as training steps after the first do. Blocks the trace leaves live are freed at the end
// of each pass, and all streams are taken as synchronized there. Peaks are over all passes
// (only the allocator's own state differs between passes, so a peak reached later is real);
// times per operation come from the last pass only: each pool call (stream layer included) is
// timed alone with steady_clock, the integrity pattern and checks are outside the timed span.
//
// Not thread-safe; the upstream must outlive the call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "report.hpp"
#include "trace.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/source/segment.hpp"

namespace umem::trace_replay {

struct replay_options {
  std::size_t passes = 2;
  std::size_t check_stride = std::size_t{64} << 10;  // integrity_checker.hpp
  // False only in tests: frees go straight to the pool even with several streams, to show the
  // stream safety checker catches what the stream-ordered layer prevents.
  bool stream_ordering = true;
  bool free_histogram = true;  // free space by block size when reserved peaked
  alloc::pool_config pool{};
};

struct replay_result {
  replay_report report;
  std::vector<std::uintptr_t> addresses;  // of each block id in the last pass
  std::size_t pending_reuses = 0;         // allocations served from a stream's pending list
};

replay_result replay(const trace& t, alloc::upstream_source& upstream,
                     const replay_options& options);

}  // namespace umem::trace_replay
