// Note [Decommitted pages]: trim() gives back the whole free granules of segments that keep live
// blocks; with max_cached_bytes set, the large pool also gives them back before it commits more
// memory; it recommits them through the upstream when it reuses them, and keeps reserved_bytes
// equal to what is committed. Sizes are multiples of the 2 MiB granule, worked
// out by hand; the fake upstream records what it was asked to give back.
#include <gtest/gtest.h>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using test::KiB;
using test::MiB;
using test::node0;

// A growable upstream with 2 MiB granules and 2 MiB-aligned segments that can give pages back.
struct growable_upstream {
  fake_upstream source{0, 2 * MiB, 2 * MiB};
  growable_upstream() {
    source.set_growable(1024 * MiB);
    source.set_decommit(true);
  }
  fake_upstream* operator->() { return &source; }
};

pool_config capped(std::size_t max_cached) {
  pool_config c;
  c.max_cached_bytes = max_cached;
  c.expandable_reserve_bytes = 1024 * MiB;
  return c;
}

std::int64_t reserved(const caching_pool& p) {
  return p.stats()(metric::reserved_bytes, size_class::all).current;
}
std::int64_t reserved_peak(const caching_pool& p) {
  return p.stats()(metric::reserved_bytes, size_class::all).peak;
}
constexpr std::int64_t mib(std::size_t n) { return static_cast<std::int64_t>(n * MiB); }

TEST(decommitted_pages, a_free_hole_is_given_back_before_the_segment_grows) {
  growable_upstream up;
  caching_pool pool(up.source, node0, coherence::fine, capped(2 * MiB));
  void* a = pool.allocate(8 * MiB);  // [0, 8) of the growable segment
  void* b = pool.allocate(8 * MiB);  // [8, 16): grown in place
  pool.deallocate(a);                // an 8 MiB hole: 8 MiB cached > 2 MiB
  EXPECT_EQ(up->decommit_calls(), 0u) << "frees never give pages back";
  void* c = pool.allocate(16 * MiB);  // fits nowhere: the hole goes back, then the segment grows
  EXPECT_EQ(up->decommitted_bytes(), 8 * MiB);
  EXPECT_EQ(up->bad_decommits(), 0u);
  EXPECT_EQ(reserved(pool), mib(24));       // b + c
  EXPECT_EQ(reserved_peak(pool), mib(24));  // never 32
  void* d = pool.allocate(8 * MiB);         // the hole again: its granules count again
  EXPECT_EQ(d, a);
  EXPECT_EQ(up->recommitted_bytes(), 8 * MiB) << "taken back through the upstream";
  EXPECT_EQ(reserved(pool), mib(32));
  EXPECT_EQ(pool.stats()(metric::allocated_bytes, size_class::all).current, mib(32));
  for (void* p : {b, c, d}) pool.deallocate(p);  // the free segment goes back at once (cap)
  EXPECT_EQ(reserved(pool), 0);
  EXPECT_EQ(up->outstanding_bytes(), 0u);
}

TEST(decommitted_pages, without_max_cached_nothing_is_given_back) {
  growable_upstream up;
  caching_pool pool(up.source, node0, coherence::fine, capped(0));
  void* a = pool.allocate(8 * MiB);
  void* b = pool.allocate(8 * MiB);
  pool.deallocate(a);
  void* c = pool.allocate(16 * MiB);
  EXPECT_EQ(up->decommit_calls(), 0u);
  EXPECT_EQ(reserved(pool), mib(32));
  pool.deallocate(b);
  pool.deallocate(c);
}

TEST(decommitted_pages, only_whole_granules_inside_free_blocks_are_given_back) {
  growable_upstream up;
  caching_pool pool(up.source, node0, coherence::fine, capped(2 * MiB));
  // [0, 2.5) of a 4 MiB segment, whose 1.5 MiB tail is split off: its free space later holds
  // one whole granule
  void* a = pool.allocate(2 * MiB + 512 * KiB);
  void* b = pool.allocate(9 * MiB + 512 * KiB);  // the tail grown by 8 MiB: [2.5, 12)
  pool.deallocate(a);  // free [0, 2.5): granule [0, 2) whole, [2, 2.5) shared with b
  void* c = pool.allocate(16 * MiB);
  EXPECT_EQ(up->decommitted_bytes(), 2 * MiB);
  EXPECT_EQ(reserved(pool), mib(12 + 16 - 2));
  pool.deallocate(b);
  pool.deallocate(c);  // the free segment goes back at once, counting only what is committed
  EXPECT_EQ(reserved(pool), 0);
  EXPECT_EQ(up->outstanding_bytes(), 0u);
}

TEST(decommitted_pages, a_source_that_cannot_is_asked_once) {
  growable_upstream up;
  up->set_decommit(false);
  caching_pool pool(up.source, node0, coherence::fine, capped(2 * MiB));
  void* keep = pool.allocate(8 * MiB);
  for (int i = 0; i < 3; ++i) {
    void* hole = pool.allocate(8 * MiB);
    void* blocker = pool.allocate(2 * MiB);
    pool.deallocate(hole);
    pool.deallocate(pool.allocate(64 * MiB));  // would have given the hole back
    pool.deallocate(blocker);
  }
  EXPECT_EQ(up->decommit_calls(), 1u);
  EXPECT_EQ(up->decommitted_bytes(), 0u);
  pool.deallocate(keep);
}

TEST(decommitted_pages, reusing_given_back_granules_respects_limit_bytes) {
  growable_upstream up;
  pool_config cfg = capped(2 * MiB);
  cfg.limit_bytes = 24 * MiB;
  caching_pool pool(up.source, node0, coherence::fine, cfg);
  void* a = pool.allocate(8 * MiB);
  void* b = pool.allocate(8 * MiB);
  pool.deallocate(a);
  void* c = pool.allocate(16 * MiB);  // reserved 24 MiB = the limit, the hole given back
  const pool_stats before = pool.stats();
  try {
    pool.allocate(8 * MiB);  // would count the hole's 8 MiB again: 32 > 24
    ADD_FAILURE() << "expected out_of_memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
  const pool_stats after = pool.stats();
  EXPECT_EQ(after(metric::reserved_bytes, size_class::all).current, mib(24));
  EXPECT_EQ(after(metric::allocated_bytes, size_class::all).current,
            before(metric::allocated_bytes, size_class::all).current);
  pool.deallocate(c);
  void* d = pool.allocate(8 * MiB);  // room now: c's space is committed and free
  pool.deallocate(b);
  pool.deallocate(d);
}

TEST(decommitted_pages, trim_gives_back_the_free_pages_of_a_segment_that_keeps_a_live_block) {
  growable_upstream up;
  caching_pool pool(up.source, node0, coherence::fine, capped(0));
  void* keep = pool.allocate(8 * MiB);  // [0, 8): live, so the segment cannot go back whole
  void* big = pool.allocate(16 * MiB);  // [8, 24): grown in place
  pool.deallocate(big);
  EXPECT_EQ(reserved(pool), mib(24));
  EXPECT_EQ(pool.trim(), 16 * MiB);
  EXPECT_EQ(up->decommitted_bytes(), 16 * MiB);
  EXPECT_EQ(up->bad_decommits(), 0u);
  EXPECT_EQ(reserved(pool), mib(8));
  EXPECT_EQ(up->outstanding_segments(), 1u);
  EXPECT_EQ(pool.trim(), 0u) << "nothing left to give back";
  EXPECT_EQ(up->decommit_calls(), 1u);
  void* again = pool.allocate(16 * MiB);  // the given-back space, taken back
  EXPECT_EQ(again, big);
  EXPECT_EQ(up->recommitted_bytes(), 16 * MiB);
  EXPECT_EQ(reserved(pool), mib(24));
  EXPECT_EQ(up->grown_calls(), 1u) << "no growth: the pages were there to take back";
  pool.deallocate(again);
  pool.deallocate(keep);
  EXPECT_EQ(pool.trim(), 24 * MiB);
  EXPECT_EQ(reserved(pool), 0);
  EXPECT_EQ(up->outstanding_bytes(), 0u);
}

TEST(decommitted_pages, a_recommit_that_runs_out_fails_the_request_and_keeps_the_pages_given_back) {
  growable_upstream up;
  caching_pool pool(up.source, node0, coherence::fine, capped(0));
  void* keep = pool.allocate(8 * MiB);
  pool.deallocate(pool.allocate(16 * MiB));
  ASSERT_EQ(pool.trim(), 16 * MiB);
  up->fail_recommits(1);
  try {
    (void)pool.allocate(16 * MiB);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory) << e.what();
  }
  const pool_stats st = pool.stats();
  EXPECT_EQ(st(metric::reserved_bytes, size_class::all).current, mib(8));
  EXPECT_EQ(st(metric::allocated_bytes, size_class::all).current, mib(8));
  EXPECT_EQ(up->recommitted_bytes(), 0u);
  void* p = pool.allocate(16 * MiB);  // the block went back to the free list whole
  EXPECT_EQ(up->recommitted_bytes(), 16 * MiB);
  EXPECT_EQ(reserved(pool), mib(24));
  pool.deallocate(p);
  pool.deallocate(keep);
}

TEST(decommitted_pages, a_segment_that_keeps_its_pages_is_not_asked_again_and_others_still_are) {
  fake_upstream up{0, 2 * MiB, 2 * MiB};
  up.set_growable(16 * MiB);
  up.set_decommit(true);
  pool_config cfg = capped(0);
  cfg.expandable_reserve_bytes = 16 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* keep1 = pool.allocate(8 * MiB);
  void* hole1 = pool.allocate(8 * MiB);  // the first segment's reservation is full
  void* keep2 = pool.allocate(8 * MiB);  // a second segment
  void* hole2 = pool.allocate(8 * MiB);
  ASSERT_EQ(up.outstanding_segments(), 2u);
  up.keep_pages_of(keep1);
  pool.deallocate(hole1);
  pool.deallocate(hole2);
  EXPECT_EQ(pool.trim(), 8 * MiB) << "the second segment's hole";
  EXPECT_EQ(up.decommit_calls(), 2u);
  EXPECT_EQ(reserved(pool), mib(24));
  EXPECT_EQ(pool.trim(), 0u);
  EXPECT_EQ(up.decommit_calls(), 2u) << "the first segment is not asked again";
  for (void* p : {keep1, keep2}) pool.deallocate(p);
  EXPECT_EQ(pool.trim(), 24 * MiB);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
}

}  // namespace
}  // namespace umem::alloc
