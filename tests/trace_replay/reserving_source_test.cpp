// reserving_source's growable segments (segment.hpp, Note [Growable segments]) and what they do
// to a replay: a freed segment followed by a larger request grows in place instead of adding a
// second segment.
#include "reserving_source.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "replay.hpp"
#include "trace_file.hpp"
#include "umem/core/error.hpp"

namespace tr = umem::trace_replay;

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
const umem::alloc::node_binding node0{umem::alloc::bind_mode::bind, {0}};

TEST(reserving_source, a_growable_segment_grows_in_place_and_goes_back_whole) {
  tr::reserving_source src;
  umem::alloc::segment s = src.allocate_growable(1, 16 * mib, node0, umem::coherence::fine);
  EXPECT_EQ(s.size, 2 * mib);
  EXPECT_EQ(s.reserved_size, 16 * mib);
  EXPECT_EQ(src.outstanding_bytes(), 2 * mib);
  void* const base = s.base;
  ASSERT_TRUE(src.grow(s, 3 * mib));  // rounded up to 4 MiB
  EXPECT_EQ(s.base, base);
  EXPECT_EQ(s.size, 6 * mib);
  EXPECT_EQ(src.outstanding_bytes(), 6 * mib);
  std::memset(static_cast<char*>(s.base) + 2 * mib, 0x5a, 4 * mib);  // the growth is writable
  EXPECT_FALSE(src.grow(s, 12 * mib));  // 10 MiB left
  EXPECT_EQ(s.size, 6 * mib);
  src.deallocate(s);
  EXPECT_EQ(src.outstanding_bytes(), 0u);
  unsigned char vec[1];
  EXPECT_EQ(mincore(static_cast<char*>(base) + 12 * mib, 4096, vec), -1);  // reservation gone
  EXPECT_EQ(errno, ENOMEM);
}

TEST(reserving_source, decommit_frees_touched_pages) {
  tr::reserving_source src;
  const umem::alloc::segment s = src.allocate(4 * mib, node0, umem::coherence::fine);
  auto* p = static_cast<unsigned char*>(s.base);
  p[0] = 7;
  unsigned char present = 0;
  ASSERT_EQ(mincore(p, 4096, &present), 0);
  EXPECT_EQ(present & 1, 1);
  EXPECT_TRUE(src.decommit(s, p, 2 * mib));
  ASSERT_EQ(mincore(p, 4096, &present), 0);
  EXPECT_EQ(present & 1, 0);
  EXPECT_EQ(p[0], 0);  // backed again with zeros on touch
  src.deallocate(s);
}

TEST(reserving_source, a_plain_segment_cannot_grow) {
  tr::reserving_source src;
  umem::alloc::segment s = src.allocate(2 * mib, node0, umem::coherence::fine);
  EXPECT_EQ(s.reserved_size, 0u);
  EXPECT_FALSE(src.grow(s, 2 * mib));
  src.deallocate(s);
  EXPECT_EQ(src.outstanding_bytes(), 0u);
}

// 4 MiB freed, then 6 MiB: with expandable segments the free 4 MiB merge with a 2 MiB growth
// (reserved peak 6 MiB, one segment and one growth); without, a second segment (4 + 6 MiB).
TEST(replay, a_larger_request_after_a_free_grows_the_segment_instead_of_adding_one) {
  std::istringstream in("a,0,4194304,0\nf,0,4194304,0\na,1,6291456,0\nf,1,6291456,0\n");
  const tr::trace t = tr::parse_trace(in, "synthetic.csv");
  tr::replay_options o;
  o.passes = 1;
  {
    tr::reserving_source upstream;
    const tr::replay_result r = tr::replay(t, upstream, o);
    EXPECT_EQ(r.report.peak_reserved, 6 * mib);
    EXPECT_EQ(r.report.upstream_allocs, 2u);
    EXPECT_EQ(r.report.integrity_failures, 0);
    EXPECT_EQ(upstream.outstanding_bytes(), 0u);
  }
  o.pool.expandable_segments = false;
  tr::reserving_source upstream;
  const tr::replay_result r = tr::replay(t, upstream, o);
  EXPECT_EQ(r.report.peak_reserved, 10 * mib);
  EXPECT_EQ(r.report.upstream_allocs, 2u);
}

}  // namespace
