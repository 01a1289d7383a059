// Note [Medium blocks] in caching_pool.hpp: with small_grow_max below small_max, requests above
// it take a free small block when one fits and otherwise the large pool, never a new small
// segment; the large pool then splits off remainders above small_grow_max. Sizes are worked out
// by hand from the default pool_config (256 B alignment, 1 MiB small_max, 2 MiB small segments,
// large segments rounded to 2 MiB) with small_grow_max 256 KiB, as device pools have it.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;  // the shared test vocabulary (pool_test_support.hpp)

pool_config medium_config() {
  pool_config c;
  c.small_grow_max = 256 * KiB;
  return c;
}

bool inside(const void* p, const void* base, std::size_t size) {
  return addr(p) >= addr(base) && addr(p) < addr(base) + size;
}

TEST(medium_blocks, a_medium_request_takes_a_free_small_block_where_one_fits) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, medium_config());
  void* tiny = pool.allocate(512);  // a new 2 MiB small segment
  void* medium = pool.allocate(1 * MiB);  // PyTorch's largest small block, in the same segment
  void* after = pool.allocate(512);      // and what follows it too
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(addr(medium), addr(tiny) + 512);
  EXPECT_EQ(addr(after), addr(medium) + 1 * MiB);
  const pool_stats s = pool.stats();
  EXPECT_EQ(cur(s, metric::segment, size_class::small_pool), 1);
  EXPECT_EQ(cur(s, metric::segment, size_class::large_pool), 0);
  EXPECT_EQ(cur(s, metric::allocated_bytes, size_class::small_pool),
            static_cast<std::int64_t>(1 * MiB + 1024));
  for (void* p : {tiny, medium, after}) pool.deallocate(p);
}

TEST(medium_blocks, a_medium_request_no_free_small_block_fits_goes_to_the_large_pool) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, medium_config());
  void* medium = pool.allocate(1 * MiB);  // no small segment yet: a 2 MiB large one
  EXPECT_EQ(up.allocate_calls(), 1u);
  ASSERT_EQ(pool.snapshot().segments.size(), 1u);
  EXPECT_EQ(pool.snapshot().segments[0].pool, size_class::large_pool);
  // Its 1 MiB remainder is above small_grow_max, so it was split off: the next medium request
  // (again no free small block) fills it instead of a new segment.
  EXPECT_EQ(pool.block_size(medium), 1 * MiB);
  void* second = pool.allocate(512 * KiB);
  EXPECT_EQ(addr(second), addr(medium) + 1 * MiB);
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(cur(pool.stats(), metric::allocated_bytes, size_class::large_pool),
            static_cast<std::int64_t>(1 * MiB + 512 * KiB));
  EXPECT_EQ(cur(pool.stats(), metric::segment, size_class::small_pool), 0);
  // A request of small_grow_max or less still takes a small segment of its own.
  void* small = pool.allocate(256 * KiB);
  EXPECT_EQ(up.allocate_calls(), 2u);
  EXPECT_FALSE(inside(small, medium, 2 * MiB));
  EXPECT_EQ(cur(pool.stats(), metric::segment, size_class::small_pool), 1);
  // A freed medium block goes back to the class that served it and merges there.
  pool.deallocate(second);
  pool.deallocate(medium);
  EXPECT_EQ(cur(pool.stats(), metric::allocated_bytes, size_class::large_pool), 0);
  void* whole = pool.allocate(2 * MiB);  // the large segment, whole again
  EXPECT_EQ(whole, medium);
  EXPECT_EQ(up.allocate_calls(), 2u);
  pool.deallocate(whole);
  pool.deallocate(small);
}

TEST(medium_blocks, without_small_grow_max_a_medium_request_takes_a_new_small_segment) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);  // host pools' default
  void* medium = pool.allocate(1 * MiB);
  ASSERT_EQ(pool.snapshot().segments.size(), 1u);
  EXPECT_EQ(pool.snapshot().segments[0].pool, size_class::small_pool);
  pool.deallocate(medium);
}

TEST(medium_blocks, large_blocks_split_off_remainders_above_small_grow_max) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, medium_config());
  void* big = pool.allocate(4 * MiB);
  pool.deallocate(big);
  // 3.5 MiB from the free 4 MiB block: the 512 KiB remainder is above small_grow_max (with the
  // default small_max rule it would stay part of the block).
  void* x = pool.allocate(3 * MiB + 512 * KiB);
  EXPECT_EQ(x, big);
  EXPECT_EQ(pool.block_size(x), 3 * MiB + 512 * KiB);
  // A remainder of exactly small_grow_max is not split off.
  pool.deallocate(x);
  void* y = pool.allocate(3 * MiB + 768 * KiB);
  EXPECT_EQ(pool.block_size(y), 4 * MiB);
  EXPECT_EQ(up.allocate_calls(), 1u);
  pool.deallocate(y);
}

TEST(medium_blocks, an_inconsistent_small_grow_max_is_rejected) {
  fake_upstream up;
  pool_config above = medium_config();
  above.small_grow_max = 2 * MiB;  // above small_max
  EXPECT_NE(error_of([&] { caching_pool p(up, node0, coherence::fine, above); },
                     errc::invalid_argument)
                .find("small_grow_max = 2097152"),
            std::string::npos);
  pool_config unaligned = medium_config();
  unaligned.small_grow_max = 1000;
  EXPECT_NE(error_of([&] { caching_pool p(up, node0, coherence::fine, unaligned); },
                     errc::invalid_argument)
                .find("multiple of the alignment"),
            std::string::npos);
  // Thread caches class blocks by size, so they cannot serve medium blocks of the large pool.
  pool_config cached = medium_config();
  cached.thread_cache_bytes = 1 * MiB;
  EXPECT_NE(error_of([&] { caching_pool p(up, node0, coherence::fine, cached); },
                     errc::invalid_argument)
                .find("needs thread caches off"),
            std::string::npos);
  cached.small_grow_max = cached.small_max;  // no medium blocks: thread caches are fine
  EXPECT_NO_THROW(caching_pool(up, node0, coherence::fine, cached));
}

}  // namespace
}  // namespace umem::alloc
