// Pool mechanics over the fake upstream: carving, reuse, best fit, small/large separation, trim,
// limits, OOM retry and misuse. Sizes and expected values are worked out by hand from the
// default pool_config (256 B alignment, 1 MiB small threshold, 2 MiB small segments, large
// segments rounded to 2 MiB).
#include "umem/allocator/detail/pool/caching_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;  // the shared test vocabulary (pool_test_support.hpp)

std::string hex(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

TEST(caching_pool, small_requests_are_carved_from_one_small_segment) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* p1 = pool.allocate(100);  // rounded to 256
  void* p2 = pool.allocate(300);  // rounded to 512, carved right after p1
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(addr(p2), addr(p1) + 256);
  EXPECT_EQ(pool.block_size(p1), 256u);
  EXPECT_EQ(pool.block_size(p2), 512u);
  EXPECT_EQ(addr(p1) % 256, 0u);

  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  const segment_snapshot& s = snap.segments[0];
  EXPECT_EQ(s.base, addr(p1));
  EXPECT_EQ(s.size, 2 * MiB);
  EXPECT_EQ(s.pool, size_class::small_pool);
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0], (block_snapshot{0, 256, 100, true}));
  EXPECT_EQ(s.blocks[1], (block_snapshot{256, 512, 300, true}));
  EXPECT_EQ(s.blocks[2], (block_snapshot{768, 2 * MiB - 768, 0, false}));
  pool.deallocate(p1);
  pool.deallocate(p2);
}

TEST(caching_pool, passes_binding_and_coherence_to_the_upstream) {
  fake_upstream up;
  const node_binding where{bind_mode::interleave, {0, 2}};
  caching_pool pool(up, where, coherence::extended_fine);
  void* p = pool.allocate(1);
  EXPECT_EQ(up.last_binding(), where);
  EXPECT_EQ(up.last_kind(), coherence::extended_fine);
  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].binding, where);
  EXPECT_EQ(snap.segments[0].kind, coherence::extended_fine);
  EXPECT_EQ(pool.describe(), "nodes 0,2 (interleave), extended_fine");
  pool.deallocate(p);
}

TEST(caching_pool, freed_block_is_reused_without_an_upstream_call) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  pool.deallocate(p);
  void* q = pool.allocate(4 * MiB);
  EXPECT_EQ(q, p);
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(up.deallocate_calls(), 0u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::cache_hits], 1);
  EXPECT_EQ(s[counter::upstream_allocs], 1);
  pool.deallocate(q);
}

TEST(caching_pool, large_request_takes_the_best_fitting_free_block) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* a = pool.allocate(6 * MiB);
  void* b = pool.allocate(4 * MiB);
  void* c = pool.allocate(8 * MiB);
  pool.deallocate(a);
  pool.deallocate(b);
  pool.deallocate(c);
  ASSERT_EQ(up.allocate_calls(), 3u);

  // 3.5 MiB: the 4 MiB block is the smallest that fits; the 0.5 MiB remainder is not above
  // small_max (1 MiB, PyTorch's kSmallSize), so the whole block is handed out.
  void* x = pool.allocate(3 * MiB + 512 * KiB);
  EXPECT_EQ(x, b);
  EXPECT_EQ(pool.block_size(x), 4 * MiB);
  // 4.5 MiB: the 6 MiB block fits best; the 1.5 MiB remainder is split off and stays free.
  void* y = pool.allocate(4 * MiB + 512 * KiB);
  EXPECT_EQ(y, a);
  EXPECT_EQ(pool.block_size(y), 4 * MiB + 512 * KiB);
  EXPECT_EQ(up.allocate_calls(), 3u);
  // The remainder of a's segment serves a 1.5 MiB request.
  void* z = pool.allocate(1 * MiB + 512 * KiB);
  EXPECT_EQ(addr(z), addr(a) + 4 * MiB + 512 * KiB);
  // 7 MiB from the 8 MiB block: a remainder of exactly 1 MiB is not split off (PyTorch's rule).
  void* w = pool.allocate(7 * MiB);
  EXPECT_EQ(w, c);
  EXPECT_EQ(pool.block_size(w), 8 * MiB);
  EXPECT_EQ(up.allocate_calls(), 3u);
  EXPECT_EQ(pool.stats()[counter::cache_hits], 4);
  pool.deallocate(x);
  pool.deallocate(y);
  pool.deallocate(z);
  pool.deallocate(w);
}

TEST(caching_pool, small_and_large_blocks_never_share_a_segment) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* big = pool.allocate(4 * MiB);
  pool.deallocate(big);  // a free 4 MiB large block is cached
  void* small = pool.allocate(1000);
  EXPECT_EQ(up.allocate_calls(), 2u);  // not carved from the cached large block
  EXPECT_FALSE(addr(small) >= addr(big) && addr(small) < addr(big) + 4 * MiB);

  // The small segment has ~2 MiB free, yet the smallest large request (just above 1 MiB) is
  // served by the large pool: the cached 4 MiB block, split, its free tail left behind.
  const std::size_t smallest_large = 1 * MiB + 256;
  void* large = pool.allocate(smallest_large);
  EXPECT_EQ(large, big);
  EXPECT_EQ(up.allocate_calls(), 2u);
  // 1 MiB exactly is small, as in PyTorch: it comes from the small segment.
  void* one_mib = pool.allocate(1 * MiB);
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_TRUE(addr(one_mib) > addr(small) && addr(one_mib) < addr(small) + 2 * MiB);

  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 2u);
  for (const segment_snapshot& s : snap.segments) {
    if (s.base == addr(big)) {
      EXPECT_EQ(s.pool, size_class::large_pool);
      ASSERT_EQ(s.blocks.size(), 2u);
      EXPECT_EQ(s.blocks[0], (block_snapshot{0, smallest_large, smallest_large, true}));
      EXPECT_EQ(s.blocks[1], (block_snapshot{smallest_large, 4 * MiB - smallest_large, 0, false}));
    } else {
      EXPECT_EQ(s.pool, size_class::small_pool);
      EXPECT_EQ(s.base, addr(small));
    }
  }
  pool.deallocate(small);
  pool.deallocate(one_mib);
  pool.deallocate(large);
}

TEST(caching_pool, large_request_does_not_use_free_space_of_small_segments) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* small = pool.allocate(256);
  void* large = pool.allocate(1 * MiB + 256);  // the smallest large request
  EXPECT_EQ(up.allocate_calls(), 2u);  // a 2 MiB large segment, not the small one's free space
  EXPECT_FALSE(addr(large) >= addr(small) && addr(large) < addr(small) + 2 * MiB);
  // The remainder (1 MiB - 256) is not above small_max, so it was not split off.
  EXPECT_EQ(pool.block_size(large), 2 * MiB);
  pool.deallocate(small);
  pool.deallocate(large);
}

TEST(caching_pool, freed_neighbours_coalesce_back_into_one_block) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* a = pool.allocate(256);
  void* b = pool.allocate(256);
  void* c = pool.allocate(256);
  pool.deallocate(b);
  pool.deallocate(a);  // merges with b
  {
    const auto blocks = pool.snapshot().segments.at(0).blocks;
    ASSERT_EQ(blocks.size(), 3u);
    EXPECT_EQ(blocks[0], (block_snapshot{0, 512, 0, false}));
    EXPECT_EQ(blocks[1], (block_snapshot{512, 256, 256, true}));
  }
  pool.deallocate(c);  // merges with both sides
  const auto blocks = pool.snapshot().segments.at(0).blocks;
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0], (block_snapshot{0, 2 * MiB, 0, false}));
}

TEST(caching_pool, trim_returns_exactly_the_fully_free_segments) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* live_large = pool.allocate(4 * MiB);  // segment A, stays in use
  void* free_large = pool.allocate(6 * MiB);  // segment B, freed below
  // 768 KiB is small; two fit one 2 MiB segment (0.5 MiB left), the third opens a second one.
  void* s1 = pool.allocate(768 * KiB);
  void* s2 = pool.allocate(768 * KiB);
  void* s3 = pool.allocate(768 * KiB);
  ASSERT_EQ(up.allocate_calls(), 4u);
  pool.deallocate(free_large);
  pool.deallocate(s3);
  pool.deallocate(s2);  // its segment still holds s1: not fully free

  EXPECT_EQ(pool.trim(), 6 * MiB + 2 * MiB);
  EXPECT_EQ(up.deallocate_calls(), 2u);
  EXPECT_EQ(up.outstanding_segments(), 2u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
  EXPECT_FALSE(pool.owns(free_large));
  EXPECT_FALSE(pool.owns(s3));
  EXPECT_TRUE(pool.owns(s2));  // freed, but its segment is kept

  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(4 * MiB + 2 * MiB));
  EXPECT_EQ(cur(s, metric::segment), 2);
  EXPECT_EQ(s[counter::upstream_frees], 2);
  // What is still allocated is untouched and usable.
  std::memset(live_large, 0xab, 4 * MiB);
  std::memset(s1, 0xcd, 768 * KiB);
  EXPECT_EQ(pool.trim(), 0u);

  pool.deallocate(live_large);
  pool.deallocate(s1);
  EXPECT_EQ(pool.trim(), 6 * MiB);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

TEST(caching_pool, max_cached_bytes_releases_free_segments_after_a_free) {
  fake_upstream up;
  pool_config cfg;
  cfg.max_cached_bytes = 4 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* a = pool.allocate(6 * MiB);
  void* b = pool.allocate(2 * MiB);
  pool.deallocate(b);  // cached 2 MiB <= 4 MiB: kept
  EXPECT_EQ(up.deallocate_calls(), 0u);
  pool.deallocate(a);  // cached 8 MiB > 4 MiB: the 6 MiB segment goes, 2 MiB stays
  EXPECT_EQ(up.deallocate_calls(), 1u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(cur(s, metric::segment), 1);
  EXPECT_TRUE(pool.owns(b));
  EXPECT_FALSE(pool.owns(a));
}

TEST(caching_pool, limit_trims_the_cache_first_then_fails_without_calling_upstream) {
  fake_upstream up;
  pool_config cfg;
  cfg.limit_bytes = 8 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(2 * MiB);
  pool.deallocate(q);  // reserved 6 MiB, 2 MiB of it cached

  // A new 4 MiB segment would make 10 MiB: the cached 2 MiB segment is released first, then
  // 4 + 4 = 8 MiB fits the limit exactly.
  void* r = pool.allocate(4 * MiB);
  EXPECT_EQ(up.deallocate_calls(), 1u);
  EXPECT_EQ(up.allocate_calls(), 3u);
  EXPECT_EQ(cur(pool.stats(), metric::reserved_bytes), static_cast<std::int64_t>(8 * MiB));

  // 1 MiB needs a 2 MiB segment: 10 MiB > 8 MiB and nothing is left to trim.
  const std::string msg = error_of([&] { pool.allocate(1 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("limit of 8388608 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("limit_bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allocating 1048576 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reserved 8388608"), std::string::npos) << msg;
  EXPECT_EQ(up.allocate_calls(), 3u);  // the upstream was never asked
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 1);
  // The retry after trimming for r counts, as PyTorch counts one after a fraction refusal; the
  // failed call had nothing to trim and made none.
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  EXPECT_EQ(cur(s, metric::allocation), 2);
  pool.deallocate(p);
  pool.deallocate(r);
}

TEST(caching_pool, limit_applies_to_the_size_the_upstream_really_returned) {
  fake_upstream up(0, 3 * MiB);  // rounds every segment up to 3 MiB
  pool_config cfg;
  cfg.limit_bytes = 2 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  const std::string msg = error_of([&] { pool.allocate(100); }, errc::out_of_memory);
  EXPECT_NE(msg.find("up to 3145728"), std::string::npos) << msg;
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(up.outstanding_bytes(), 0u);  // given back
  EXPECT_EQ(up.bad_deallocates(), 0u);
  EXPECT_EQ(cur(pool.stats(), metric::reserved_bytes), 0);
}

TEST(caching_pool, uses_the_whole_segment_the_upstream_returned) {
  fake_upstream up(0, 3 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(100);
  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].size, 3 * MiB);
  EXPECT_EQ(cur(pool.stats(), metric::reserved_bytes), static_cast<std::int64_t>(3 * MiB));
  pool.deallocate(p);
}

TEST(caching_pool, upstream_oom_trims_and_retries_once) {
  fake_upstream up(8 * MiB);
  caching_pool pool(up, node_binding{bind_mode::bind, {1}}, coherence::coarse);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(2 * MiB);
  pool.deallocate(q);  // upstream holds 6 MiB, 2 MiB of it cached here

  void* r = pool.allocate(4 * MiB);  // 6 + 4 > 8: fails, trim gives back 2 MiB, retry fits
  EXPECT_NE(r, nullptr);
  EXPECT_EQ(up.failed_calls(), 1u);
  EXPECT_EQ(up.deallocate_calls(), 1u);
  pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  EXPECT_EQ(s[counter::num_ooms], 0);
  EXPECT_EQ(s[counter::upstream_allocs], 3);
  EXPECT_EQ(s[counter::upstream_frees], 1);

  // Nothing cached to release: no retry, an OOM naming the request, binding, kind and stats.
  const std::string msg = error_of([&] { pool.allocate(2 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("allocating 2097152 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node 1 (bind), coarse"), std::string::npos) << msg;
  EXPECT_NE(msg.find("allocated 8388608 bytes, reserved 8388608 bytes, cached 0 bytes"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("fake_upstream"), std::string::npos) << msg;  // the upstream's own words
  s = pool.stats();
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  EXPECT_EQ(s[counter::num_ooms], 1);
  EXPECT_EQ(up.failed_calls(), 2u);
  pool.deallocate(p);
  pool.deallocate(r);
}

TEST(caching_pool, upstream_oom_after_the_retry_is_reported) {
  fake_upstream up(8 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(6 * MiB);
  pool.deallocate(pool.allocate(1 * MiB + 512 * KiB));  // a cached 2 MiB segment
  // 6 + 2 + 4 > 8 fails; trim frees 2 MiB; 6 + 4 > 8 fails again.
  const std::string msg = error_of([&] { pool.allocate(4 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("even after"), std::string::npos) << msg;
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  EXPECT_EQ(s[counter::num_ooms], 1);
  EXPECT_EQ(up.failed_calls(), 2u);
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(6 * MiB));
  pool.deallocate(p);
}

TEST(caching_pool, foreign_pointer_is_rejected_with_its_address) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(64);
  int local = 0;
  const std::string msg = error_of([&] { pool.deallocate(&local); }, errc::invalid_argument);
  EXPECT_NE(msg.find(hex(&local)), std::string::npos) << msg;
  EXPECT_NE(msg.find("not allocated by this pool"), std::string::npos) << msg;
  EXPECT_FALSE(pool.owns(&local));
  EXPECT_TRUE(pool.owns(p));
  EXPECT_TRUE(pool.owns(static_cast<char*>(p) + 1000));  // inside its segment
  error_of([&] { (void)pool.block_size(&local); }, errc::invalid_argument);
  EXPECT_EQ(cur(pool.stats(), metric::allocation), 1);
  pool.deallocate(p);
}

TEST(caching_pool, double_free_is_detected_distinctly) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* a = pool.allocate(256);
  void* b = pool.allocate(256);
  pool.deallocate(b);  // a (allocated) below it: b still starts a free block
  const pool_stats before = pool.stats();
  std::string msg = error_of([&] { pool.deallocate(b); }, errc::invalid_argument);
  EXPECT_NE(msg.find(hex(b)), std::string::npos) << msg;
  EXPECT_NE(msg.find("double free: this address starts a block that is already free"),
            std::string::npos)
      << msg;
  EXPECT_EQ(pool.stats(), before);  // a rejected free changes nothing

  pool.deallocate(a);  // b's block merged into a's: b is now inside a free block
  msg = error_of([&] { pool.deallocate(b); }, errc::invalid_argument);
  EXPECT_NE(msg.find("double free or invalid pointer"), std::string::npos) << msg;
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

TEST(caching_pool, interior_pointer_is_rejected) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* a = pool.allocate(1024);
  const std::string msg =
      error_of([&] { pool.deallocate(static_cast<char*>(a) + 16); }, errc::invalid_argument);
  EXPECT_NE(msg.find("not the start of an allocation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16 bytes inside"), std::string::npos) << msg;
  EXPECT_EQ(pool.block_size(a), 1024u);  // still allocated
  pool.deallocate(a);
}

TEST(caching_pool, size_zero_and_overflow_are_invalid) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
  EXPECT_NE(error_of([&] { pool.allocate(0); }, errc::invalid_argument).find("allocate(0)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pool.allocate(max); }, errc::invalid_argument).find("overflows"),
            std::string::npos);
  // Survives the 256 B rounding but not the 2 MiB segment rounding.
  EXPECT_NE(error_of([&] { pool.allocate(max - 1000); }, errc::invalid_argument).find("segment"),
            std::string::npos);
  EXPECT_EQ(up.allocate_calls(), 0u);
  EXPECT_EQ(pool.stats(), pool_stats{});
}

TEST(caching_pool, null_deallocate_is_a_no_op) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  pool.deallocate(nullptr);
  EXPECT_EQ(pool.stats(), pool_stats{});
}

TEST(caching_pool, inconsistent_config_is_rejected) {
  fake_upstream up;
  pool_config bad_alignment;
  bad_alignment.alignment = 100;
  EXPECT_NE(error_of([&] { caching_pool p(up, node0, coherence::fine, bad_alignment); },
                     errc::invalid_argument)
                .find("power of two"),
            std::string::npos);
  pool_config small_segments;
  small_segments.small_segment_size = 512 * KiB;  // below the 1 MiB small threshold
  EXPECT_NE(error_of([&] { caching_pool p(up, node0, coherence::fine, small_segments); },
                     errc::invalid_argument)
                .find("small_segment_size"),
            std::string::npos);
}

// Returns half of what is asked: a broken upstream the pool must not trust.
class short_upstream final : public upstream_source {
 public:
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override {
    return segment{buffer_, bytes / 2, where, kind, false};
  }
  void deallocate(const segment& s) noexcept override { returned = s.base == buffer_; }
  std::string describe() const override { return "short upstream"; }
  bool returned = false;

 private:
  alignas(4096) static inline char buffer_[4096];
};

TEST(caching_pool, short_segment_from_the_upstream_is_an_internal_error) {
  short_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  const std::string msg = error_of([&] { pool.allocate(64); }, errc::internal);
  EXPECT_NE(msg.find("short upstream"), std::string::npos) << msg;
  EXPECT_TRUE(up.returned);
  EXPECT_EQ(cur(pool.stats(), metric::reserved_bytes), 0);
}

TEST(caching_pool, destructor_returns_every_segment) {
  fake_upstream up;
  {
    caching_pool pool(up, node0, coherence::fine);
    void* a = pool.allocate(100);
    pool.allocate(3 * MiB);  // still allocated at destruction (a warning is logged)
    pool.deallocate(a);
  }
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_EQ(up.outstanding_segments(), 0u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

}  // namespace
}  // namespace umem::alloc
