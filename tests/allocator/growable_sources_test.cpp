// Note [Growable segments] (segment.hpp) through the adaptors: limiting_source charges a growth
// like a new segment and refuses one past a limit; gpu_visible_source maps every grown piece once
// and unmaps every piece (checked on the ROCr test double, whose locks are undone by base address
// like CUDA's registrations, and with a recording mapper that fails on demand).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "fake_upstream.hpp"
#include "umem/allocator/gpu/gpu_visible_source.hpp"
#include "umem/allocator/source/limiting_source.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;

constexpr std::size_t MiB = std::size_t{1} << 20;
const node_binding node0{bind_mode::bind, {0}};

TEST(limiting_source, a_growth_is_charged_like_a_new_segment_and_refused_past_the_limit) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  byte_limits limits;
  limits.total = 8 * MiB;
  limiting_source lim(up, limits);
  segment s = lim.allocate_growable(4 * MiB, 64 * MiB, node0, coherence::fine);
  ASSERT_GT(s.reserved_size, s.size);
  EXPECT_EQ(lim.reserved_total(), 4 * MiB);

  const segment before = s;
  try {
    (void)lim.grow(s, 6 * MiB);
    ADD_FAILURE() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);  // the pool's retry path, as for a new segment
    EXPECT_NE(std::string(e.what()).find("limit.total reached"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.size, before.size);
  EXPECT_EQ(up.grow_calls(), 0u);  // refused before the upstream is asked
  EXPECT_EQ(lim.reserved_total(), 4 * MiB);

  ASSERT_TRUE(lim.grow(s, 4 * MiB));
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_EQ(lim.reserved_total(), 8 * MiB);
  EXPECT_EQ(lim.reserved_on(0), 8 * MiB);
  lim.deallocate(s);
  EXPECT_EQ(lim.reserved_total(), 0u);
  EXPECT_EQ(lim.reserved_on(0), 0u);
  EXPECT_EQ(up.bad_deallocates(), 0u);
}

TEST(limiting_source, per_node_charges_of_a_grown_interleaved_segment_match_a_new_one) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  limiting_source lim(up, byte_limits{});
  const node_binding three{bind_mode::interleave, {0, 1, 2}};
  // 3 MiB + 1 and 2 MiB do not split evenly over three nodes: the charge must still be the one
  // of a 5 MiB + 1 segment.
  segment s = lim.allocate_growable(3 * MiB + 1, 64 * MiB, three, coherence::fine);
  ASSERT_TRUE(lim.grow(s, 2 * MiB));
  ASSERT_EQ(s.size, 5 * MiB + 1);
  const std::uint64_t share = (5 * MiB + 1) / 3;
  EXPECT_EQ(lim.reserved_on(0), 5 * MiB + 1 - 2 * share);
  EXPECT_EQ(lim.reserved_on(1), share);
  EXPECT_EQ(lim.reserved_on(2), share);
  lim.deallocate(s);
  for (int n : {0, 1, 2}) EXPECT_EQ(lim.reserved_on(n), 0u) << n;
}

TEST(limiting_source, a_refused_growth_charges_nothing) {
  fake_upstream up;
  up.set_growable(8 * MiB);
  limiting_source lim(up, byte_limits{});
  segment s = lim.allocate_growable(4 * MiB, 8 * MiB, node0, coherence::fine);
  EXPECT_FALSE(lim.grow(s, 6 * MiB));  // 4 MiB left in the reservation
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(lim.reserved_total(), 4 * MiB);
  lim.deallocate(s);
  EXPECT_EQ(lim.reserved_total(), 0u);
}

// Records map/unmap like a mapper that registers by base address: unmap forgets the
// registration starting at s.base, whatever s.size says.
class recording_mapper final : public gpu_mapper {
 public:
  void map(const segment& s) override {
    if (fail_next_) {
      fail_next_ = false;
      throw_error(errc::runtime_error, "recording_mapper: told to fail");
    }
    maps.emplace_back(s.base, s.size);
    registered.emplace_back(s.base, s.size);
  }
  void unmap(const segment& s) noexcept override {
    unmaps.emplace_back(s.base, s.size);
    std::erase_if(registered, [&](const auto& r) { return r.first == s.base; });
  }
  bool gpu_accessible() const override { return true; }
  bool pageable() const override { return pageable_pages; }
  std::string describe() const override { return "recording mapper"; }
  void fail_next() { fail_next_ = true; }

  std::vector<std::pair<void*, std::size_t>> maps, unmaps, registered;
  bool pageable_pages = false;  // like a lock or a registration: pinned

 private:
  bool fail_next_ = false;
};

void* at(const segment& s, std::size_t offset) { return static_cast<char*>(s.base) + offset; }

TEST(gpu_visible_source, each_grown_piece_is_mapped_once_and_every_piece_unmapped) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  recording_mapper m;
  m.pageable_pages = true;  // like SVM attributes: the GPU sees one range
  gpu_visible_source src(up, m);
  segment s = src.allocate_growable(2 * MiB, 64 * MiB, node0, coherence::fine);
  ASSERT_TRUE(src.grow(s, 4 * MiB));
  ASSERT_TRUE(src.grow(s, 2 * MiB));
  using piece = std::pair<void*, std::size_t>;
  EXPECT_EQ(m.maps, (std::vector<piece>{{s.base, 2 * MiB}, {at(s, 2 * MiB), 4 * MiB},
                                        {at(s, 6 * MiB), 2 * MiB}}));
  src.deallocate(s);
  EXPECT_EQ(m.unmaps, m.maps);
  EXPECT_TRUE(m.registered.empty());
  EXPECT_EQ(up.bad_deallocates(), 0u);
  EXPECT_EQ(up.outstanding_segments(), 0u);
}

TEST(gpu_visible_source, a_segment_never_grown_is_unmapped_as_one_range) {
  fake_upstream up;  // cannot grow
  recording_mapper m;
  gpu_visible_source src(up, m);
  segment s = src.allocate_growable(2 * MiB, 64 * MiB, node0, coherence::fine);
  EXPECT_EQ(s.reserved_size, 0u);
  EXPECT_FALSE(src.grow(s, 2 * MiB));
  src.deallocate(s);
  EXPECT_EQ(m.unmaps, m.maps);
  EXPECT_EQ(m.maps.size(), 1u);
}

// Note [Decommitted pages]: pinned GPU memory keeps its pages; pageable memory passes the request on.
TEST(gpu_visible_source, decommit_reaches_the_source_only_for_pageable_mappings) {
  fake_upstream up;
  up.set_decommit(true);
  recording_mapper m;
  gpu_visible_source src(up, m);
  segment s = src.allocate(4 * MiB, node0, coherence::fine);
  EXPECT_FALSE(src.decommit(s, s.base, 2 * MiB));
  EXPECT_EQ(up.decommit_calls(), 0u);
  m.pageable_pages = true;
  EXPECT_TRUE(src.decommit(s, s.base, 2 * MiB));
  EXPECT_EQ(up.decommitted_bytes(), 2 * MiB);
  src.deallocate(s);
}

// Note [Pinned memory does not grow]: a block across two registrations breaks the driver's copies.
TEST(gpu_visible_source, pinned_mappings_never_grow_so_no_block_spans_two_registrations) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  recording_mapper m;  // pinned, like cuMemHostRegister or hsa_amd_memory_lock_to_pool
  gpu_visible_source src(up, m);
  segment s = src.allocate_growable(2 * MiB, 64 * MiB, node0, coherence::fine);
  EXPECT_EQ(s.reserved_size, 0u) << "no reservation: growth would need a second registration";
  EXPECT_FALSE(src.grow(s, 2 * MiB));
  EXPECT_EQ(s.size, 2 * MiB);
  src.deallocate(s);
  using piece = std::pair<void*, std::size_t>;
  EXPECT_EQ(m.maps, (std::vector<piece>{{s.base, 2 * MiB}}));
  EXPECT_EQ(m.unmaps, m.maps);
  EXPECT_EQ(up.outstanding_segments(), 0u);
}

TEST(gpu_visible_source, a_growth_the_mapper_refuses_is_forgotten_and_the_segment_kept) {
  fake_upstream up;
  up.set_growable(64 * MiB);
  recording_mapper m;
  m.pageable_pages = true;
  gpu_visible_source src(up, m);
  segment s = src.allocate_growable(2 * MiB, 64 * MiB, node0, coherence::fine);
  m.fail_next();
  EXPECT_THROW((void)src.grow(s, 2 * MiB), umem::error);
  EXPECT_EQ(s.size, 2 * MiB);
  EXPECT_EQ(m.maps.size(), 1u);
  src.deallocate(s);
  EXPECT_TRUE(m.registered.empty());
  EXPECT_EQ(m.unmaps.size(), 1u);  // only the piece that was mapped
}

using test::GpuMapperDouble;

TEST_F(GpuMapperDouble, ASegmentLockedToAPoolDoesNotGrowAndItsOneLockIsUndone) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  fake_upstream up;  // the double never dereferences the memory
  up.set_growable(64 * MiB);
  gpu_visible_source src(up, *mapper_);
  // Socket 1: CPU agent of KFD node 1 ("node1", pool 0 = FINE), its GPU is KFD node 5
  // (gpu_mapper_test.cpp, XnackOffLocksToTheSocketsCpuPoolForItsGpuOnly).
  segment s = src.allocate_growable(2 * MiB, 64 * MiB, node_binding{bind_mode::bind, {1}},
                                    coherence::fine);
  EXPECT_FALSE(src.grow(s, 4 * MiB));
  src.deallocate(s);
  const auto l = take_log();
  ASSERT_EQ(l.size(), 2u) << log();
  const std::regex lock("memory_lock_to_pool size=" + std::to_string(2 * MiB) +
                        " pool=node1/0 flags=0 agents=node5 -> SUCCESS (l[0-9]+)");
  std::smatch match;
  ASSERT_TRUE(std::regex_match(l[0], match, lock)) << l[0];
  EXPECT_EQ(l[1], "memory_unlock " + match[1].str() + " -> SUCCESS");
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

}  // namespace
}  // namespace umem::alloc
