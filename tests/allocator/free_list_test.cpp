// The free-list policy on fake addresses: no memory is allocated or touched.
#include "umem/allocator/detail/pool/free_list.hpp"

#include <gtest/gtest.h>

#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

constexpr std::uintptr_t seg_a = 0x10000;

// Four allocated 1 KiB blocks filling one 4 KiB segment: a b c d.
struct free_list_of_four : ::testing::Test {
  free_list fl{256};
  block* a = nullptr;
  block* b = nullptr;
  block* c = nullptr;
  block* d = nullptr;
  void SetUp() override {
    fl.add_segment(seg_a, 4096);
    a = fl.take(fl.best_fit(1024), 1024);
    b = fl.take(fl.best_fit(1024), 1024);
    c = fl.take(fl.best_fit(1024), 1024);
    d = fl.take(fl.best_fit(1024), 1024);
  }
};

TEST(free_list, new_segment_is_one_free_block) {
  free_list fl(256);
  block* b = fl.add_segment(seg_a, 4096);
  EXPECT_EQ(b->address, seg_a);
  EXPECT_EQ(b->size, 4096u);
  EXPECT_EQ(b->segment_base, seg_a);
  EXPECT_TRUE(free_list::is_free_segment(b));
  EXPECT_EQ(fl.free_bytes(), 4096u);
  EXPECT_EQ(fl.free_block_count(), 1u);
}

TEST(free_list, free_segment_count_follows_takes_merges_and_removals) {
  free_list fl(256);
  fl.add_segment(seg_a, 4096);
  block* other = fl.add_segment(0x20000, 2048);
  EXPECT_EQ(fl.free_segment_count(), 2u);
  block* x = fl.take(fl.best_fit(4096), 1024);  // seg_a split: its free tail is not whole
  EXPECT_EQ(x->address, seg_a);
  EXPECT_EQ(fl.free_segment_count(), 1u);
  block* y = fl.take(fl.best_fit(1024), 1024);
  fl.release(x);
  EXPECT_EQ(fl.free_segment_count(), 1u);  // y still splits seg_a
  fl.release(y);                           // merges back into one whole free block
  EXPECT_EQ(fl.free_segment_count(), 2u);
  EXPECT_EQ(fl.free_segments().size(), 2u);
  fl.remove_segment(other);
  EXPECT_EQ(fl.free_segment_count(), 1u);
}

TEST(free_list, take_splits_off_the_tail) {
  free_list fl(256);
  block* b = fl.take(fl.add_segment(seg_a, 4096), 1024);
  EXPECT_TRUE(b->allocated);
  EXPECT_EQ(b->size, 1024u);
  ASSERT_NE(b->next, nullptr);
  EXPECT_EQ(b->next->address, seg_a + 1024);
  EXPECT_EQ(b->next->size, 3072u);
  EXPECT_FALSE(b->next->allocated);
  EXPECT_EQ(b->next->prev, b);
  EXPECT_EQ(b->next->segment_base, seg_a);
  EXPECT_EQ(fl.free_bytes(), 3072u);
  EXPECT_EQ(fl.free_block_count(), 1u);
}

TEST(free_list, remainder_below_minimum_stays_in_the_block) {
  free_list fl(256);
  block* b = fl.take(fl.add_segment(seg_a, 1280), 1100);  // remainder 180 < 256
  EXPECT_EQ(b->size, 1280u);
  EXPECT_EQ(b->next, nullptr);
  EXPECT_EQ(fl.free_block_count(), 0u);
}

TEST(free_list, remainder_equal_to_minimum_is_split) {
  free_list fl(256);
  block* b = fl.take(fl.add_segment(seg_a, 1280), 1024);  // remainder exactly 256
  EXPECT_EQ(b->size, 1024u);
  ASSERT_NE(b->next, nullptr);
  EXPECT_EQ(b->next->size, 256u);
}

TEST_F(free_list_of_four, full_segment_has_no_free_block) {
  EXPECT_EQ(d->address, seg_a + 3072);
  EXPECT_EQ(d->size, 1024u);
  EXPECT_EQ(fl.free_block_count(), 0u);
  EXPECT_EQ(fl.best_fit(1), nullptr);
}

TEST_F(free_list_of_four, release_between_allocated_neighbours_does_not_merge) {
  block* r = fl.release(c);
  EXPECT_EQ(r, c);
  EXPECT_EQ(r->size, 1024u);
  EXPECT_EQ(fl.free_block_count(), 1u);
}

TEST_F(free_list_of_four, coalesce_with_right_neighbour) {
  fl.release(c);
  block* r = fl.release(b);  // c (free) is b's higher neighbour
  EXPECT_EQ(r, b);
  EXPECT_EQ(r->address, seg_a + 1024);
  EXPECT_EQ(r->size, 2048u);
  EXPECT_EQ(r->next, d);
  EXPECT_EQ(d->prev, r);
  EXPECT_EQ(fl.free_block_count(), 1u);
  EXPECT_EQ(fl.free_bytes(), 2048u);
}

TEST_F(free_list_of_four, coalesce_with_left_neighbour_keeps_the_lower_block) {
  fl.release(b);
  block* r = fl.release(c);  // b (free) is c's lower neighbour
  EXPECT_EQ(r, b);
  EXPECT_EQ(r->address, seg_a + 1024);
  EXPECT_EQ(r->size, 2048u);
  EXPECT_EQ(r->prev, a);
  EXPECT_EQ(r->next, d);
  EXPECT_EQ(d->prev, r);
  EXPECT_EQ(fl.free_block_count(), 1u);
}

TEST_F(free_list_of_four, coalesce_with_both_neighbours) {
  fl.release(b);
  fl.release(d);
  EXPECT_EQ(fl.free_block_count(), 2u);
  block* r = fl.release(c);
  EXPECT_EQ(r, b);
  EXPECT_EQ(r->size, 3072u);
  EXPECT_EQ(r->next, nullptr);
  EXPECT_EQ(fl.free_block_count(), 1u);
  EXPECT_FALSE(free_list::is_free_segment(r));  // a is still allocated

  block* whole = fl.release(a);
  EXPECT_EQ(whole, a);  // the block at the segment's base survives every merge
  EXPECT_EQ(whole->size, 4096u);
  EXPECT_TRUE(free_list::is_free_segment(whole));
  ASSERT_EQ(fl.free_segments().size(), 1u);
  EXPECT_EQ(fl.free_segments()[0], whole);
}

TEST(free_list, adjacent_segments_never_merge) {
  free_list fl(256);
  // The second segment starts exactly where the first ends.
  block* x = fl.take(fl.add_segment(seg_a, 4096), 4096);
  block* y = fl.take(fl.add_segment(seg_a + 4096, 4096), 4096);
  EXPECT_EQ(x->next, nullptr);
  EXPECT_EQ(y->prev, nullptr);
  fl.release(x);
  fl.release(y);
  EXPECT_EQ(fl.free_block_count(), 2u);
  EXPECT_EQ(fl.free_bytes(), 8192u);
  EXPECT_EQ(fl.free_segments().size(), 2u);
  EXPECT_EQ(fl.best_fit(4097), nullptr);
}

TEST(free_list, best_fit_picks_the_smallest_fitting_block) {
  free_list fl(256);
  fl.add_segment(0x100000, 3072);
  block* small = fl.add_segment(0x200000, 1024);
  block* mid = fl.add_segment(0x300000, 2048);
  EXPECT_EQ(fl.best_fit(1500), mid);
  EXPECT_EQ(fl.best_fit(1024), small);
  EXPECT_EQ(fl.best_fit(1), small);
  EXPECT_EQ(fl.best_fit(2049)->size, 3072u);
  EXPECT_EQ(fl.best_fit(3073), nullptr);
}

TEST(free_list, best_fit_prefers_the_lower_address_among_equal_sizes) {
  free_list fl(256);
  fl.add_segment(0x300000, 1024);
  block* low = fl.add_segment(0x100000, 1024);
  fl.add_segment(0x200000, 1024);
  EXPECT_EQ(fl.best_fit(512), low);
}

TEST(free_list, free_segments_lists_only_whole_segments_largest_first) {
  free_list fl(256);
  block* s1 = fl.add_segment(0x100000, 2048);
  block* s2 = fl.add_segment(0x200000, 8192);
  fl.take(fl.add_segment(0x300000, 4096), 1024);  // partly used: its free tail is not listed
  const auto segs = fl.free_segments();
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0], s2);
  EXPECT_EQ(segs[1], s1);
}

TEST(free_list, remove_segment_forgets_it) {
  free_list fl(256);
  block* s1 = fl.add_segment(0x100000, 2048);
  fl.add_segment(0x200000, 8192);
  fl.remove_segment(s1);
  EXPECT_EQ(fl.free_bytes(), 8192u);
  EXPECT_EQ(fl.free_block_count(), 1u);
  EXPECT_EQ(fl.best_fit(1024)->address, 0x200000u);
}

TEST(free_list, records_are_reused_after_merges) {
  free_list fl(256);
  block* first = fl.add_segment(seg_a, 4096);
  block* b = fl.take(first, 1024);
  block* tail = b->next;
  fl.release(b);  // tail merges into b; its record is recycled
  block* again = fl.take(fl.best_fit(1024), 1024);
  EXPECT_EQ(again, first);
  EXPECT_EQ(again->next, tail);  // the recycled record holds the new tail
  EXPECT_EQ(tail->address, seg_a + 1024);
  EXPECT_EQ(tail->size, 3072u);
  EXPECT_FALSE(tail->allocated);
}

TEST(free_list, zero_minimum_split_is_rejected) {
  try {
    free_list fl(0);
    FAIL() << "expected umem::error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

}  // namespace
}  // namespace umem::alloc
