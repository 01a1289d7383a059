#include "replay.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "reserving_source.hpp"
#include "stream_safety_checker.hpp"
#include "trace_file.hpp"

namespace tr = umem::trace_replay;

namespace {

tr::trace parse(const std::string& text) {
  std::istringstream in(text);
  return tr::parse_trace(in, "synthetic.csv");
}

// Block 0 is freed on stream 1; stream 2 allocates the same size before and after stream 1's
// sync event (`e`), then stream 1 frees and reuses a block of its own.
const char* const two_streams =
    "a,0,4096,1\n"
    "f,0,4096,1\n"
    "a,1,4096,2\n"   // stream 1 may still be using block 0: must get other memory
    "e,-1,0,1\n"     // stream 1's work up to here is complete
    "a,2,4096,2\n"   // now block 0's memory is safe for stream 2 (and best fit picks it)
    "a,3,8192,1\n"
    "f,3,8192,1\n"
    "a,4,8192,1\n";  // same stream: stream order makes the pending block safe at once

tr::replay_options one_pass() {
  tr::replay_options o;
  o.passes = 1;
  return o;
}

}  // namespace

TEST(stream_ordering, a_block_freed_on_one_stream_waits_for_its_event_before_another_gets_it) {
  const tr::trace t = parse(two_streams);
  tr::reserving_source upstream;
  const tr::replay_result r = tr::replay(t, upstream, one_pass());
  EXPECT_NE(r.addresses[1], r.addresses[0]);
  EXPECT_EQ(r.addresses[2], r.addresses[0]);
  EXPECT_EQ(r.addresses[4], r.addresses[3]);
  EXPECT_EQ(r.pending_reuses, 1u);
  EXPECT_EQ(r.report.stream_violations, 0);
  EXPECT_EQ(r.report.integrity_failures, 0);
}

// Without the stream-ordered layer the pool hands block 0 to stream 2 at once, and the replay's
// independent checker sees it: the check above can fail.
TEST(stream_ordering, without_the_layer_the_checker_reports_the_unsafe_reuse) {
  const tr::trace t = parse(two_streams);
  tr::reserving_source upstream;
  tr::replay_options o = one_pass();
  o.stream_ordering = false;
  const tr::replay_result r = tr::replay(t, upstream, o);
  EXPECT_EQ(r.addresses[1], r.addresses[0]);
  EXPECT_EQ(r.report.stream_violations, 1);
}

TEST(stream_safety_checker, same_stream_reuse_is_safe_and_an_event_clears_a_stream) {
  alignas(64) static char mem[1024];
  tr::stream_safety_checker c;
  c.on_free(mem, 512, 1);
  c.on_free(mem + 512, 512, 2);
  c.on_alloc(mem, 256, 1);  // same stream
  EXPECT_EQ(c.violations(), 0u);
  c.on_sync(2);
  c.on_alloc(mem + 512, 512, 1);  // stream 2 synchronized
  EXPECT_EQ(c.violations(), 0u);
  c.on_free(mem, 1024, 3);
  c.on_alloc(mem + 100, 8, 1);
  EXPECT_EQ(c.violations(), 1u);
}

// Two allocations of 1000 and 3000 bytes are rounded to the pool's 256-byte alignment: 1024 and
// 3072, so 4096 bytes are allocated at the peak, in one 2 MiB small-pool segment.
TEST(replay, reports_peaks_and_upstream_calls_of_a_small_trace) {
  const tr::trace t = parse("a,0,1000,0\na,1,3000,0\nf,0,1000,0\nf,1,3000,0\n");
  tr::reserving_source upstream;
  const tr::replay_result r = tr::replay(t, upstream, tr::replay_options{});
  EXPECT_EQ(r.report.peak_allocated, 4096u);
  EXPECT_EQ(r.report.peak_reserved, std::uint64_t{2} << 20);
  EXPECT_EQ(r.report.upstream_allocs, 1u);  // the second pass reuses the cached segment
  EXPECT_EQ(r.report.passes, 2u);
  EXPECT_EQ(r.report.all.samples, 4u);  // the last pass only
  EXPECT_EQ(r.report.blocks_checked, 4u);
  EXPECT_EQ(r.report.integrity_failures, 0);
}

TEST(replay, blocks_left_live_by_the_trace_are_freed_at_the_end_of_each_pass) {
  const tr::trace t = parse("a,0,5000000,0\n");
  tr::reserving_source upstream;
  const tr::replay_result r = tr::replay(t, upstream, tr::replay_options{});
  EXPECT_EQ(r.report.blocks_checked, 2u);
  EXPECT_EQ(r.report.upstream_allocs, 1u);
  EXPECT_EQ(r.report.peak_allocated, 5000192u);  // 5000000 rounded up to 256
}

// The quick replay of the real traces that CI runs (also as the ctest trace_replay.quick):
// integrity only, never the speed or fragmentation targets.
TEST(replay, real_traces_replay_without_integrity_failures) {
  for (const char* name : {"trace_gpt2_train.csv.gz", "trace_resnet50_train.csv.gz"}) {
    const auto path = std::filesystem::path(UMEM_TRACES_DIR) / name;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "needs the real trace " << path;
    const tr::trace t = tr::load_trace(path);
    tr::reserving_source upstream;
    tr::replay_options o = one_pass();
    o.check_stride = std::size_t{1} << 20;
    o.free_histogram = false;
    const tr::replay_result r = tr::replay(t, upstream, o);
    EXPECT_EQ(r.report.integrity_failures, 0) << name;
    EXPECT_EQ(r.report.stream_violations, 0) << name;
    EXPECT_EQ(r.report.blocks_checked, t.allocs) << name;
    // Rounding only adds: the pool's peak is at least the recorded live peak.
    EXPECT_GE(r.report.peak_allocated, t.peak_live_bytes) << name;
    EXPECT_GE(r.report.peak_reserved, r.report.peak_allocated) << name;
    EXPECT_EQ(upstream.outstanding_bytes(), 0u) << name;  // the pool returned every segment
  }
}
