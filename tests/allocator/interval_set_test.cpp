// The given-back-granules record on made-up addresses: no memory is allocated or touched.
#include "umem/allocator/detail/pool/interval_set.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace umem::alloc {
namespace {

using range = interval_set::range;

std::vector<range> gaps(const interval_set& s, std::uintptr_t begin, std::uintptr_t end) {
  std::vector<range> out;
  s.for_each_gap(begin, end, [&](std::uintptr_t a, std::uintptr_t e) { out.push_back({a, e}); });
  return out;
}

// 0x100-0x200 and 0x300-0x400 given back.
interval_set two_ranges() {
  interval_set s;
  s.insert(0x100, 0x200);
  s.insert(0x300, 0x400);
  return s;
}

TEST(interval_set, an_empty_set_has_one_gap_the_whole_range) {
  const interval_set s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(gaps(s, 0x10, 0x20), (std::vector<range>{{0x10, 0x20}}));
  EXPECT_EQ(s.covered(0x10, 0x20), 0u);
  EXPECT_TRUE(gaps(s, 0x20, 0x20).empty());
}

TEST(interval_set, inserting_next_to_a_range_merges_both_sides) {
  interval_set s = two_ranges();
  s.insert(0x200, 0x300);  // touches both neighbours
  EXPECT_EQ(s.ranges(), (std::vector<range>{{0x100, 0x400}}));
  s.insert(0x80, 0x100);  // touches the lower end only
  s.insert(0x500, 0x600);  // apart
  EXPECT_EQ(s.ranges(), (std::vector<range>{{0x80, 0x400}, {0x500, 0x600}}));
}

TEST(interval_set, gaps_are_the_uncovered_pieces_in_order) {
  const interval_set s = two_ranges();
  EXPECT_EQ(gaps(s, 0x0, 0x500),
            (std::vector<range>{{0x0, 0x100}, {0x200, 0x300}, {0x400, 0x500}}));
  // Starting inside a range and ending inside another.
  EXPECT_EQ(gaps(s, 0x180, 0x380), (std::vector<range>{{0x200, 0x300}}));
  // Ending exactly where a range starts; starting exactly where one ends.
  EXPECT_EQ(gaps(s, 0x200, 0x300), (std::vector<range>{{0x200, 0x300}}));
  // Wholly covered.
  EXPECT_TRUE(gaps(s, 0x120, 0x1f0).empty());
}

TEST(interval_set, covered_counts_only_the_overlap) {
  const interval_set s = two_ranges();
  EXPECT_EQ(s.covered(0x0, 0x1000), 0x200u);
  EXPECT_EQ(s.covered(0x180, 0x380), 0x80u + 0x80u);
  EXPECT_EQ(s.covered(0x200, 0x300), 0u);
  EXPECT_EQ(s.covered(0x100, 0x101), 1u);
}

TEST(interval_set, take_hands_each_covered_piece_out_and_keeps_the_rest) {
  interval_set s = two_ranges();
  std::vector<range> taken;
  s.take(0x180, 0x380, [&](std::uintptr_t a, std::uintptr_t e) { taken.push_back({a, e}); });
  EXPECT_EQ(taken, (std::vector<range>{{0x180, 0x200}, {0x300, 0x380}}));
  EXPECT_EQ(s.ranges(), (std::vector<range>{{0x100, 0x180}, {0x380, 0x400}}));
  // A piece in the middle of a range splits it in two.
  s.take(0x120, 0x140, [](std::uintptr_t, std::uintptr_t) {});
  EXPECT_EQ(s.ranges(), (std::vector<range>{{0x100, 0x120}, {0x140, 0x180}, {0x380, 0x400}}));
}

TEST(interval_set, when_taking_a_piece_fails_it_and_the_later_ones_stay) {
  interval_set s = two_ranges();
  int calls = 0;
  auto second_fails = [&](std::uintptr_t, std::uintptr_t) {
    if (++calls == 2) throw std::runtime_error("upstream refused");
  };
  EXPECT_THROW(s.take(0x0, 0x1000, second_fails), std::runtime_error);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(s.ranges(), (std::vector<range>{{0x300, 0x400}}));
}

}  // namespace
}  // namespace umem::alloc
