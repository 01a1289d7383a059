// caching_pool's per-call headroom (Note [Headroom]): the most bytes one allocation may add to
// the reserved bytes, checked before the upstream is asked. Sizes worked out by hand from the
// default pool_config (256 B alignment, 1 MiB small threshold, 2 MiB segments and rounding).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;

std::int64_t reserved(const caching_pool& pool) { return cur(pool.stats(), metric::reserved_bytes); }

TEST(headroom, a_cached_block_is_served_with_none) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  void* p = pool.allocate(4 * MiB);
  pool.deallocate(p);
  EXPECT_EQ(pool.allocate(4 * MiB, 0), p);
  EXPECT_EQ(up.allocate_calls(), 1u);
  pool.deallocate(p);
}

TEST(headroom, a_new_segment_past_it_fails_without_asking_the_upstream) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  const std::string msg = error_of([&] { pool.allocate(4 * MiB, 2 * MiB); }, errc::out_of_memory);
  EXPECT_NE(msg.find("the caller's headroom"), std::string::npos) << msg;
  EXPECT_EQ(up.allocate_calls(), 0u);
  EXPECT_EQ(reserved(pool), 0);
  EXPECT_EQ(pool.stats()[counter::num_ooms], 1);
  void* p = pool.allocate(4 * MiB, 4 * MiB);  // exactly what the segment adds
  EXPECT_EQ(reserved(pool), static_cast<std::int64_t>(4 * MiB));
  pool.deallocate(p);
}

TEST(headroom, a_growth_past_it_is_refused_and_leaves_nothing_reserved) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* keep = pool.allocate(4 * MiB);  // the growable segment, 4 MiB
  ASSERT_EQ(reserved(pool), static_cast<std::int64_t>(4 * MiB));
  for (int i = 0; i < 2; ++i) {  // a refused growth must not make the next call succeed
    error_of([&] { pool.allocate(8 * MiB, 6 * MiB); }, errc::out_of_memory);
    EXPECT_EQ(reserved(pool), static_cast<std::int64_t>(4 * MiB));
  }
  EXPECT_EQ(up.grown_calls(), 0u);
  void* more = pool.allocate(8 * MiB, 8 * MiB);  // grows in place by 8 MiB
  EXPECT_EQ(addr(more), addr(keep) + 4 * MiB);
  EXPECT_EQ(reserved(pool), static_cast<std::int64_t>(12 * MiB));
  pool.deallocate(more);
  pool.deallocate(keep);
}

TEST(headroom, free_segments_are_released_to_make_room) {
  fake_upstream up;
  pool_config cfg;
  cfg.expandable_segments = false;
  caching_pool pool(up, node0, coherence::fine, cfg);
  pool.deallocate(pool.allocate(4 * MiB));  // a free 4 MiB segment, cached
  // 6 MiB more than 4 reserved would need 10 with a headroom of 2: the cached segment goes first.
  void* p = pool.allocate(6 * MiB, 2 * MiB);
  EXPECT_EQ(up.deallocate_calls(), 1u);
  EXPECT_EQ(reserved(pool), static_cast<std::int64_t>(6 * MiB));
  pool.deallocate(p);
}

TEST(headroom, bounds_own_segments_too) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  error_of([&] { pool.allocate_segment(2 * MiB, 1 * MiB); }, errc::out_of_memory);
  EXPECT_EQ(up.allocate_calls(), 0u);
  pool.deallocate(pool.allocate_segment(2 * MiB, 2 * MiB));
  EXPECT_EQ(up.outstanding_bytes(), 0u);
}

TEST(headroom, the_next_call_without_one_is_unbounded) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine);
  error_of([&] { pool.allocate(4 * MiB, 0); }, errc::out_of_memory);
  void* p = pool.allocate(4 * MiB);
  EXPECT_EQ(reserved(pool), static_cast<std::int64_t>(4 * MiB));
  pool.deallocate(p);
}

}  // namespace
}  // namespace umem::alloc
