// Note [Expandable segments] (caching_pool.hpp) over the fake upstream in growable mode: large
// misses grow one segment in place, the fallback to new segments, limits, the OOM retry, trim,
// stats and snapshot. Sizes are worked out by hand from the default pool_config (1 MiB small
// threshold = the large pool's minimum split remainder, large segments and growths rounded to
// 2 MiB); the fake's granularity is 1 byte, so every rounding seen is the pool's.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;  // the shared test vocabulary (pool_test_support.hpp)

std::int64_t i64(std::size_t n) { return static_cast<std::int64_t>(n); }

TEST(expandable_segments, a_large_miss_grows_the_segment_in_place_by_what_its_free_tail_lacks) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);  // a growable segment of 4 MiB, reserving 64 MiB
  ASSERT_EQ(up.allocate_growable_calls(), 1u);
  void* q = pool.allocate(2 * MiB);  // no free block: the segment grows by 2 MiB
  EXPECT_EQ(addr(q), addr(p) + 4 * MiB);
  pool.deallocate(q);                // free tail [4, 6) MiB
  // The tail lacks 2.5 MiB: growth of 4 MiB (2 MiB rounding).
  void* r = pool.allocate(4 * MiB + 512 * KiB);
  EXPECT_EQ(addr(r), addr(p) + 4 * MiB);
  EXPECT_EQ(pool.block_size(r), 4 * MiB + 512 * KiB);  // the 1.5 MiB left (> 1 MiB) is split off

  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(up.grown_calls(), 2u);
  EXPECT_EQ(up.outstanding_bytes(), 10 * MiB);
  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), i64(10 * MiB));
  EXPECT_EQ(cur(s, metric::reserved_bytes, size_class::large_pool), i64(10 * MiB));
  EXPECT_EQ(cur(s, metric::segment), 1);
  EXPECT_EQ(s(metric::segment, size_class::all).peak, 1);
  EXPECT_EQ(s[counter::upstream_allocs], 3);  // one segment, two growths
  EXPECT_EQ(s[counter::upstream_frees], 0);

  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].base, addr(p));
  EXPECT_EQ(snap.segments[0].size, 10 * MiB);
  EXPECT_EQ(snap.segments[0].pool, size_class::large_pool);
  const std::vector<block_snapshot> blocks{{0, 4 * MiB, 4 * MiB, true},
                                           {4 * MiB, 4 * MiB + 512 * KiB, 4 * MiB + 512 * KiB, true},
                                           {8 * MiB + 512 * KiB, 1 * MiB + 512 * KiB, 0, false}};
  EXPECT_EQ(snap.segments[0].blocks, blocks);
  EXPECT_TRUE(pool.owns(reinterpret_cast<void*>(addr(p) + 10 * MiB - 1)));
  EXPECT_FALSE(pool.owns(reinterpret_cast<void*>(addr(p) + 10 * MiB)));

  pool.deallocate(p);
  pool.deallocate(r);  // the blocks merge across the grown ranges into one free segment
  EXPECT_EQ(pool.snapshot().segments[0].blocks,
            (std::vector<block_snapshot>{{0, 10 * MiB, 0, false}}));
  EXPECT_EQ(pool.trim(), 10 * MiB);
  EXPECT_EQ(up.outstanding_segments(), 0u);
  EXPECT_EQ(up.bad_deallocates(), 0u);  // returned with its grown size
  EXPECT_EQ(up.bad_grows(), 0u);
}

TEST(expandable_segments, an_exhausted_reservation_falls_back_to_a_new_segment_that_grows_next) {
  fake_upstream up;
  up.set_growable(8 * MiB);  // every reservation is 8 MiB
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(6 * MiB);  // 4 MiB left in the reservation: refused, new segment
  EXPECT_EQ(up.grow_calls(), 1u);
  EXPECT_EQ(up.grown_calls(), 0u);
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_FALSE(addr(q) >= addr(p) && addr(q) < addr(p) + 8 * MiB);
  void* r = pool.allocate(2 * MiB);  // the new segment is the growable one now
  EXPECT_EQ(addr(r), addr(q) + 6 * MiB);
  EXPECT_EQ(up.grown_calls(), 1u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::segment), 2);
  EXPECT_EQ(cur(s, metric::reserved_bytes), i64(12 * MiB));
  EXPECT_EQ(s[counter::upstream_allocs], 3);
  for (void* x : {p, q, r}) pool.deallocate(x);
}

TEST(expandable_segments, a_source_that_cannot_grow_gets_a_new_segment_per_miss) {
  fake_upstream up;  // not growable: allocate_growable is allocate
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(2 * MiB);
  EXPECT_EQ(up.allocate_growable_calls(), 2u);
  EXPECT_EQ(up.grow_calls(), 0u);  // no growable segment, so never asked
  EXPECT_EQ(cur(pool.stats(), metric::segment), 2);
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(expandable_segments, turned_off_the_pool_never_asks_for_growable_segments) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  pool_config cfg;
  cfg.expandable_segments = false;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(2 * MiB);
  EXPECT_EQ(up.allocate_growable_calls(), 0u);
  EXPECT_EQ(up.grow_calls(), 0u);
  EXPECT_EQ(up.allocate_calls(), 2u);
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(expandable_segments, small_requests_never_grow_a_segment) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(pool.allocate(768 * KiB));  // 2 fit a segment
  EXPECT_EQ(up.allocate_growable_calls(), 0u);
  EXPECT_EQ(up.grow_calls(), 0u);
  EXPECT_EQ(cur(pool.stats(), metric::segment, size_class::small_pool), 2);
  for (void* b : blocks) pool.deallocate(b);
}

TEST(expandable_segments, a_growth_past_the_limit_trims_first_then_fails_without_the_upstream) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  pool_config cfg;
  cfg.limit_bytes = 6 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* p = pool.allocate(4 * MiB);
  pool.deallocate(pool.allocate(1000));  // a cached 2 MiB small segment: reserved 6 MiB
  void* q = pool.allocate(2 * MiB);      // 6 + 2 > 6: trim frees the small segment, then grow
  EXPECT_EQ(addr(q), addr(p) + 4 * MiB);
  pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::upstream_frees], 1);
  EXPECT_EQ(cur(s, metric::reserved_bytes), i64(6 * MiB));
  EXPECT_EQ(cur(s, metric::segment), 1);

  const std::size_t grows = up.grow_calls();
  const std::string msg = error_of([&] { pool.allocate(2 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("growing the expandable segment of 2097152 bytes would take the reserved "
                     "bytes from 6291456 past the pool's limit of 6291456 bytes (limit_bytes)"),
            std::string::npos)
      << msg;
  EXPECT_EQ(up.grow_calls(), grows);
  s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 1);
  EXPECT_EQ(cur(s, metric::reserved_bytes), i64(6 * MiB));
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(expandable_segments, upstream_oom_on_a_growth_trims_and_retries_once) {
  fake_upstream up(8 * MiB);
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  pool.deallocate(pool.allocate(1000));  // a cached 2 MiB small segment: 6 MiB outstanding
  void* q = pool.allocate(4 * MiB);      // 6 + 4 > 8: fails, trim gives back 2 MiB, retry fits
  EXPECT_EQ(addr(q), addr(p) + 4 * MiB);
  EXPECT_EQ(up.failed_calls(), 1u);
  EXPECT_EQ(up.grown_calls(), 1u);
  pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  EXPECT_EQ(s[counter::upstream_frees], 1);
  EXPECT_EQ(cur(s, metric::reserved_bytes), i64(8 * MiB));

  // Nothing left to release: the second failure is reported.
  const std::string msg = error_of([&] { pool.allocate(2 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("the upstream has no memory to grow the expandable segment"),
            std::string::npos)
      << msg;
  s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 1);
  EXPECT_EQ(s[counter::num_alloc_retries], 1);
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(expandable_segments, a_growable_segment_released_by_the_retry_is_replaced_by_a_new_one) {
  fake_upstream up(8 * MiB);
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  pool.deallocate(pool.allocate(4 * MiB));  // the growable segment, fully free: 4 MiB
  // Growing it by 4 MiB would need 12 - 4 = 8 MiB; the fake has 4 left. The retry releases the
  // free segment itself, so the pool asks for a new 12 MiB one, which does not fit either.
  const std::string msg = error_of([&] { pool.allocate(12 * MiB); }, errc::out_of_memory);
  EXPECT_EQ(up.outstanding_segments(), 0u);
  EXPECT_EQ(cur(pool.stats(), metric::reserved_bytes), 0);
  // With the memory back, a new growable segment serves the request and later growths.
  up.set_capacity(0);
  void* p = pool.allocate(6 * MiB);
  void* q = pool.allocate(2 * MiB);
  EXPECT_EQ(addr(q), addr(p) + 6 * MiB);
  EXPECT_EQ(up.bad_grows(), 0u);
  pool.deallocate(p);
  pool.deallocate(q);
}

TEST(expandable_segments, trim_returns_a_grown_segment_whole_and_the_next_miss_starts_a_new_one) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  void* q = pool.allocate(4 * MiB);  // grown to 8 MiB
  pool.deallocate(p);
  EXPECT_EQ(pool.trim(), 0u);  // partly used: kept whole
  pool.deallocate(q);
  EXPECT_EQ(pool.trim(), 8 * MiB);
  EXPECT_EQ(up.deallocate_calls(), 1u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), 0);
  EXPECT_EQ(cur(s, metric::segment), 0);
  EXPECT_EQ(s[counter::upstream_frees], 1);
  void* r = pool.allocate(2 * MiB);  // no growable segment any more: a new one
  EXPECT_EQ(up.allocate_growable_calls(), 2u);
  EXPECT_EQ(up.bad_grows(), 0u);
  pool.deallocate(r);
}

TEST(expandable_segments, the_destructor_returns_a_grown_segment_with_its_grown_size) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  {
    caching_pool pool(up, node0, coherence::fine);
    pool.allocate(4 * MiB);
    pool.allocate(4 * MiB);
  }
  EXPECT_EQ(up.outstanding_segments(), 0u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

TEST(expandable_segments, the_reservation_size_must_be_a_multiple_of_the_alignment) {
  fake_upstream up;
  pool_config cfg;
  cfg.expandable_reserve_bytes = 1000;
  const std::string msg = error_of([&] { caching_pool pool(up, node0, coherence::fine, cfg); },
                                   errc::invalid_argument);
  EXPECT_NE(msg.find("expandable_reserve_bytes = 1000"), std::string::npos) << msg;
  cfg.expandable_segments = false;  // unused then
  caching_pool pool(up, node0, coherence::fine, cfg);
}

}  // namespace
}  // namespace umem::alloc
