// caching_pool::allocate_segment (Note [Own segments]): a segment for one request, never carved
// from the cache and returned to the upstream when freed. Sizes worked out by hand from the
// default pool_config (256 B alignment, large segments rounded to 2 MiB).
#include <gtest/gtest.h>

#include <cstdint>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;

TEST(own_segments, are_never_carved_from_cached_blocks) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  pool.deallocate(pool.allocate(8 * MiB));  // an 8 MiB free block stays cached
  ASSERT_EQ(up.allocate_calls(), 1u);

  void* own = pool.allocate_segment(2 * MiB);
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_EQ(pool.block_size(own), 2 * MiB);
  pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(10 * MiB));
  EXPECT_EQ(cur(s, metric::segment, size_class::large_pool), 2);
  EXPECT_EQ(cur(s, metric::allocated_bytes, size_class::large_pool),
            static_cast<std::int64_t>(2 * MiB));

  pool.deallocate(own);  // back to the upstream at once, the cached block stays
  EXPECT_EQ(up.deallocate_calls(), 1u);
  s = pool.stats();
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(cur(s, metric::segment), 1);
  EXPECT_EQ(cur(s, metric::allocation), 0);
  EXPECT_FALSE(pool.owns(own));
}

TEST(own_segments, are_rounded_to_a_large_segment_and_handed_out_whole) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* own = pool.allocate_segment(100);
  EXPECT_EQ(pool.block_size(own), 2 * MiB);
  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(snap.segments[0].pool, size_class::large_pool);
  ASSERT_EQ(snap.segments[0].blocks.size(), 1u);
  EXPECT_EQ(snap.segments[0].blocks[0], (block_snapshot{0, 2 * MiB, 100, true}));

  // The rest of the segment is not the cache's: a small request takes a segment of its own.
  void* small = pool.allocate(256);
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_FALSE(addr(small) >= addr(own) && addr(small) < addr(own) + 2 * MiB);
  pool.deallocate(small);
  pool.deallocate(own);
  EXPECT_EQ(up.outstanding_bytes(), 2 * MiB);  // the small segment, cached
}

TEST(own_segments, count_against_the_limit_after_trimming_the_cache) {
  fake_upstream up;
  pool_config cfg;
  cfg.limit_bytes = 6 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  pool.deallocate(pool.allocate(4 * MiB));  // cached

  void* a = pool.allocate_segment(4 * MiB);  // 8 MiB would pass the limit: the cache goes first
  EXPECT_EQ(up.deallocate_calls(), 1u);
  const std::string msg = error_of([&] { pool.allocate_segment(4 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("limit_bytes"), std::string::npos) << msg;
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 1);
  EXPECT_EQ(cur(s, metric::reserved_bytes), static_cast<std::int64_t>(4 * MiB));
  pool.deallocate(a);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
}

TEST(own_segments, go_back_when_freed_with_thread_caches_on) {
  fake_upstream up;
  pool_config cfg;
  cfg.thread_cache_bytes = 64 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  for (int i = 0; i < 3; ++i) pool.deallocate(pool.allocate_segment(2 * MiB));
  EXPECT_EQ(up.allocate_calls(), 3u);
  EXPECT_EQ(up.deallocate_calls(), 3u);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
  EXPECT_EQ(cur(pool.stats(), metric::allocation), 0);
}

TEST(own_segments, double_free_is_rejected) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* own = pool.allocate_segment(2 * MiB);
  pool.deallocate(own);
  error_of([&] { pool.deallocate(own); }, errc::invalid_argument);
  EXPECT_EQ(up.deallocate_calls(), 1u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

TEST(own_segments, size_zero_is_invalid) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  error_of([&] { pool.allocate_segment(0); }, errc::invalid_argument);
  EXPECT_EQ(up.allocate_calls(), 0u);
}

}  // namespace
}  // namespace umem::alloc
