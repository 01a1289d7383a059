// What a replay measured, printed the same way by umem's replay (main.cpp) and PyTorch's
// (cca/cca_replay.cpp), so run-on-h200.sh can put the two side by side.
//
// Output: a human-readable block, then one machine-readable line
//   result,<allocator>,<trace>,<peak_allocated>,<peak_reserved>,<ratio>,<upstream_allocs>,
//   <upstream_frees>,<median_ns>,<p99_ns>,<integrity_failures>,<stream_violations>
// where a check that did not run prints -1.
//
// Self-contained (standard library only) for the same reason as trace.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace.hpp"

namespace umem::trace_replay {

struct latency {
  double median_ns = 0;
  double p99_ns = 0;
  std::size_t samples = 0;
};

// Median and 99th percentile (nearest rank) of `ns`; reorders it.
latency summarize(std::vector<std::uint32_t>& ns);

// Free bytes in blocks of [lower, upper) bytes, by pool.
struct free_bucket {
  std::uint64_t lower = 0;
  std::uint64_t upper = 0;
  std::size_t small_blocks = 0;
  std::uint64_t small_bytes = 0;
  std::size_t large_blocks = 0;
  std::uint64_t large_bytes = 0;
};

struct replay_report {
  std::string allocator;  // "umem" or "cca"
  std::string trace_name;
  std::string upstream;   // where segments came from
  std::string metadata;   // trace's first line, for the recorded CCA peaks
  std::size_t events = 0, allocs = 0, frees = 0, segment_allocs = 0, segment_frees = 0,
              syncs = 0, streams = 0;
  std::size_t passes = 0;
  std::uint64_t trace_peak_live = 0;  // sum of recorded sizes at their peak
  std::uint64_t peak_allocated = 0;
  std::uint64_t peak_reserved = 0;
  std::uint64_t upstream_allocs = 0;
  std::uint64_t upstream_frees = 0;
  latency all, alloc, free;         // of the measured (last) pass
  std::int64_t integrity_failures = -1;  // -1: not checked
  std::size_t blocks_checked = 0;
  std::size_t check_stride = 0;
  std::vector<std::string> failure_messages;  // the first few
  std::int64_t stream_violations = -1;         // -1: not checked
  double wall_seconds = 0;
  // umem only: free space when reserved peaked (empty otherwise)
  std::vector<free_bucket> free_at_peak;
  std::uint64_t allocated_at_peak_reserved = 0;

  double ratio() const {
    return peak_allocated == 0 ? 0 : static_cast<double>(peak_reserved) /
                                         static_cast<double>(peak_allocated);
  }
};

// Copies the trace's counts into `r`.
void describe_trace(replay_report& r, const trace& t, const std::string& name);

std::string format_text(const replay_report& r);
std::string format_result_line(const replay_report& r);

}  // namespace umem::trace_replay
