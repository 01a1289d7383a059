// Statistics: key names, values after a scripted sequence (worked out by hand below), merged
// peaks across pools, JSON export and the segment/block snapshot.
#include "umem/allocator/pool_stats.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <sstream>
#include <vector>

#include "fake_upstream.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;

constexpr std::int64_t KiB = 1024;
constexpr std::int64_t MiB = 1024 * KiB;

const node_binding node0{bind_mode::bind, {0}};

// The sequence, with the default config but small_max = 1 MiB - 256 (256 B alignment, 1 MiB the
// smallest large request, 2 MiB small segments, large segments rounded to 2 MiB, large splits
// only when >= 1 MiB remains):
//   a = allocate(1000)   small, 1024 B block; new 2 MiB small segment
//   b = allocate(5 MiB)  large, new 6 MiB segment, split: 5 MiB block + 1 MiB free tail
//   c = allocate(200)    small, 256 B block carved from the small segment (cache hit)
//   free(a)
//   d = allocate(1 MiB)  large (not < 1 MiB), takes the 1 MiB tail exactly (cache hit)
//   free(b)
//   trim()               nothing fully free: returns 0
//   free(d)              the 6 MiB segment is now fully free
//   trim()               returns 6 MiB
pool_config scripted_config() {
  pool_config c;
  c.small_max = static_cast<std::size_t>(1 * MiB - 256);
  return c;
}

struct pool_stats_scripted : ::testing::Test {
  fake_upstream up;
  caching_pool pool{up, node0, coherence::fine, scripted_config()};
  std::size_t first_trim = 1;
  std::size_t second_trim = 0;
  void* c = nullptr;
  void SetUp() override {
    void* a = pool.allocate(1000);
    void* b = pool.allocate(5 * MiB);
    c = pool.allocate(200);
    pool.deallocate(a);
    void* d = pool.allocate(1 * MiB);
    pool.deallocate(b);
    first_trim = pool.trim();
    pool.deallocate(d);
    second_trim = pool.trim();
  }
  void TearDown() override { pool.deallocate(c); }
};

TEST_F(pool_stats_scripted, trims_release_what_was_fully_free) {
  EXPECT_EQ(first_trim, 0u);
  EXPECT_EQ(second_trim, static_cast<std::size_t>(6 * MiB));
}

TEST_F(pool_stats_scripted, flat_map_has_pytorch_keys_and_hand_computed_values) {
  const auto m = to_flat_map(pool.stats());
  // 5 gauges x 3 size classes x 4 fields + 6 counters.
  EXPECT_EQ(m.size(), 66u);

  // allocated_bytes, all: 1024; +5 MiB; +256; -1024; +1 MiB; -5 MiB; -1 MiB.
  EXPECT_EQ(m.at("allocated_bytes.all.current"), 256);
  EXPECT_EQ(m.at("allocated_bytes.all.peak"), 6 * MiB + 256);
  EXPECT_EQ(m.at("allocated_bytes.all.allocated"), 1024 + 5 * MiB + 256 + 1 * MiB);
  EXPECT_EQ(m.at("allocated_bytes.all.freed"), 1024 + 5 * MiB + 1 * MiB);
  EXPECT_EQ(m.at("allocated_bytes.small_pool.current"), 256);
  EXPECT_EQ(m.at("allocated_bytes.small_pool.peak"), 1280);
  EXPECT_EQ(m.at("allocated_bytes.small_pool.allocated"), 1280);
  EXPECT_EQ(m.at("allocated_bytes.small_pool.freed"), 1024);
  EXPECT_EQ(m.at("allocated_bytes.large_pool.current"), 0);
  EXPECT_EQ(m.at("allocated_bytes.large_pool.peak"), 6 * MiB);
  EXPECT_EQ(m.at("allocated_bytes.large_pool.allocated"), 6 * MiB);
  EXPECT_EQ(m.at("allocated_bytes.large_pool.freed"), 6 * MiB);

  // requested_bytes, all: 1000; +5 MiB; +200; -1000; +1 MiB; -5 MiB; -1 MiB.
  EXPECT_EQ(m.at("requested_bytes.all.current"), 200);
  EXPECT_EQ(m.at("requested_bytes.all.peak"), 6 * MiB + 200);
  EXPECT_EQ(m.at("requested_bytes.all.allocated"), 1200 + 6 * MiB);
  EXPECT_EQ(m.at("requested_bytes.all.freed"), 1000 + 6 * MiB);
  EXPECT_EQ(m.at("requested_bytes.small_pool.peak"), 1200);
  EXPECT_EQ(m.at("requested_bytes.large_pool.peak"), 6 * MiB);

  // allocation counts, all: 1, 2, 3, 2, 3, 2, 1.
  EXPECT_EQ(m.at("allocation.all.current"), 1);
  EXPECT_EQ(m.at("allocation.all.peak"), 3);
  EXPECT_EQ(m.at("allocation.all.allocated"), 4);
  EXPECT_EQ(m.at("allocation.all.freed"), 3);
  EXPECT_EQ(m.at("allocation.small_pool.current"), 1);
  EXPECT_EQ(m.at("allocation.small_pool.peak"), 2);
  EXPECT_EQ(m.at("allocation.large_pool.peak"), 2);
  EXPECT_EQ(m.at("allocation.large_pool.freed"), 2);

  // reserved_bytes, all: 2 MiB; 8 MiB; 2 MiB after the second trim.
  EXPECT_EQ(m.at("reserved_bytes.all.current"), 2 * MiB);
  EXPECT_EQ(m.at("reserved_bytes.all.peak"), 8 * MiB);
  EXPECT_EQ(m.at("reserved_bytes.all.allocated"), 8 * MiB);
  EXPECT_EQ(m.at("reserved_bytes.all.freed"), 6 * MiB);
  EXPECT_EQ(m.at("reserved_bytes.small_pool.current"), 2 * MiB);
  EXPECT_EQ(m.at("reserved_bytes.small_pool.freed"), 0);
  EXPECT_EQ(m.at("reserved_bytes.large_pool.current"), 0);
  EXPECT_EQ(m.at("reserved_bytes.large_pool.peak"), 6 * MiB);

  EXPECT_EQ(m.at("segment.all.current"), 1);
  EXPECT_EQ(m.at("segment.all.peak"), 2);
  EXPECT_EQ(m.at("segment.all.allocated"), 2);
  EXPECT_EQ(m.at("segment.all.freed"), 1);
  EXPECT_EQ(m.at("segment.small_pool.current"), 1);
  EXPECT_EQ(m.at("segment.large_pool.freed"), 1);

  EXPECT_EQ(m.at("num_alloc_retries"), 0);
  EXPECT_EQ(m.at("num_ooms"), 0);
  EXPECT_EQ(m.at("upstream_allocs"), 2);
  EXPECT_EQ(m.at("upstream_frees"), 1);
  EXPECT_EQ(m.at("cache_hits"), 2);  // c and d
  EXPECT_EQ(m.at("spills"), 0);
}

TEST_F(pool_stats_scripted, named_pool_keys) {
  const auto m = to_flat_map(pool.stats(), "node0.fine");
  EXPECT_EQ(m.size(), 66u);
  EXPECT_EQ(m.at("allocated_bytes.node0.fine.current"), 256);
  EXPECT_EQ(m.at("allocated_bytes.node0.fine.small_pool.peak"), 1280);
  EXPECT_EQ(m.at("segment.node0.fine.large_pool.freed"), 1);
  EXPECT_EQ(m.at("upstream_allocs.node0.fine"), 2);
  EXPECT_EQ(m.count("allocated_bytes.all.current"), 0u);
}

TEST_F(pool_stats_scripted, reset_peak_sets_peaks_to_currents) {
  pool.reset_peak_stats();
  const pool_stats s = pool.stats();
  EXPECT_EQ(s(metric::allocated_bytes, size_class::all).peak, 256);
  EXPECT_EQ(s(metric::reserved_bytes, size_class::all).peak, 2 * MiB);
  EXPECT_EQ(s(metric::reserved_bytes, size_class::large_pool).peak, 0);
  // Cumulative fields are not peaks: they stay.
  EXPECT_EQ(s(metric::reserved_bytes, size_class::all).allocated, 8 * MiB);
}

TEST_F(pool_stats_scripted, count_spill_counts) {
  pool.count_spill();
  pool.count_spill();
  EXPECT_EQ(pool.stats()[counter::spills], 2);
}

TEST_F(pool_stats_scripted, json_is_the_flat_map) {
  const nlohmann::json j = nlohmann::json::parse(to_json(pool.stats()));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.size(), 66u);
  for (const auto& [key, value] : to_flat_map(pool.stats())) EXPECT_EQ(j.at(key), value) << key;
}

TEST_F(pool_stats_scripted, snapshot_shows_the_remaining_segment_and_its_blocks) {
  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  const segment_snapshot& s = snap.segments[0];
  EXPECT_EQ(s.size, static_cast<std::size_t>(2 * MiB));
  EXPECT_EQ(s.pool, size_class::small_pool);
  EXPECT_EQ(s.binding, node0);
  EXPECT_EQ(s.kind, coherence::fine);
  EXPECT_FALSE(s.huge_pages);
  // a's 1024 B were freed (before c) and merged with nothing: c sits after it.
  ASSERT_EQ(s.blocks.size(), 3u);
  EXPECT_EQ(s.blocks[0], (block_snapshot{0, 1024, 0, false}));
  EXPECT_EQ(s.blocks[1], (block_snapshot{1024, 256, 200, true}));
  EXPECT_EQ(s.blocks[2],
            (block_snapshot{1280, static_cast<std::size_t>(2 * MiB) - 1280, 0, false}));

  const nlohmann::json j = nlohmann::json::parse(to_json(snap));
  ASSERT_EQ(j.at("segments").size(), 1u);
  const auto& js = j.at("segments")[0];
  std::ostringstream base;
  base << std::hex << "0x" << s.base;
  EXPECT_EQ(js.at("address"), base.str());
  EXPECT_EQ(js.at("size"), 2 * MiB);
  EXPECT_EQ(js.at("binding").at("mode"), "bind");
  EXPECT_EQ(js.at("binding").at("nodes"), nlohmann::json::array({0}));
  EXPECT_EQ(js.at("coherence"), "fine");
  EXPECT_EQ(js.at("pool"), "small_pool");
  ASSERT_EQ(js.at("blocks").size(), 3u);
  EXPECT_EQ(js.at("blocks")[1].at("offset"), 1024);
  EXPECT_EQ(js.at("blocks")[1].at("requested"), 200);
  EXPECT_EQ(js.at("blocks")[1].at("state"), "allocated");
  EXPECT_EQ(js.at("blocks")[2].at("state"), "free");
}

TEST(pool_snapshot, segments_are_in_address_order_and_blocks_cover_them) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::coarse);
  std::vector<void*> ps;
  for (std::int64_t n : {100 * KiB, 3 * MiB, 700 * KiB, 9 * MiB, 600 * KiB, std::int64_t{1000}})
    ps.push_back(pool.allocate(static_cast<std::size_t>(n)));
  pool.deallocate(ps[2]);
  const pool_snapshot snap = pool.snapshot();
  ASSERT_GE(snap.segments.size(), 3u);
  for (std::size_t i = 1; i < snap.segments.size(); ++i)
    EXPECT_LT(snap.segments[i - 1].base, snap.segments[i].base);
  for (const segment_snapshot& s : snap.segments) {
    std::size_t next = 0;
    for (const block_snapshot& b : s.blocks) {
      EXPECT_EQ(b.offset, next);
      next += b.size;
    }
    EXPECT_EQ(next, s.size);
  }
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (i != 2) pool.deallocate(ps[i]);
}

TEST(pool_stat, increase_and_decrease) {
  stat s;
  s.increase(10);
  s.increase(5);
  s.decrease(12);
  s.increase(4);
  EXPECT_EQ(s, (stat{7, 15, 19, 12}));
}

TEST(pool_stats_names, follow_pytorch_where_the_meaning_is_the_same) {
  EXPECT_STREQ(to_string(metric::allocated_bytes), "allocated_bytes");
  EXPECT_STREQ(to_string(metric::reserved_bytes), "reserved_bytes");
  EXPECT_STREQ(to_string(metric::requested_bytes), "requested_bytes");
  EXPECT_STREQ(to_string(metric::allocation), "allocation");
  EXPECT_STREQ(to_string(metric::segment), "segment");
  EXPECT_STREQ(to_string(size_class::small_pool), "small_pool");
  EXPECT_STREQ(to_string(counter::num_alloc_retries), "num_alloc_retries");
  EXPECT_STREQ(to_string(counter::num_ooms), "num_ooms");
}

// Pool A peaks at 4 MiB allocated and frees it; then pool B peaks at 4 MiB. The total never
// exceeded 4 MiB allocated, although the per-pool peaks add up to 8 MiB.
TEST(global_peak_tracker, merged_peak_is_the_peak_of_the_sum) {
  fake_upstream up;
  global_peak_tracker peaks;
  auto a = std::make_unique<caching_pool>(up, node0, coherence::fine, pool_config{}, &peaks);
  caching_pool b(up, node0, coherence::coarse, pool_config{}, &peaks);
  a->deallocate(a->allocate(4 * MiB));
  void* p = b.allocate(4 * MiB);

  const std::vector<pool_stats> all{a->stats(), b.stats()};
  const pool_stats merged = merge(all, peaks);
  EXPECT_EQ(all[0](metric::allocated_bytes, size_class::all).peak, 4 * MiB);
  EXPECT_EQ(all[1](metric::allocated_bytes, size_class::all).peak, 4 * MiB);
  EXPECT_EQ(merged(metric::allocated_bytes, size_class::all).current, 4 * MiB);
  EXPECT_EQ(merged(metric::allocated_bytes, size_class::all).peak, 4 * MiB);
  EXPECT_EQ(merged(metric::allocated_bytes, size_class::large_pool).peak, 4 * MiB);
  EXPECT_EQ(merged(metric::allocated_bytes, size_class::all).allocated, 8 * MiB);
  EXPECT_EQ(merged(metric::allocated_bytes, size_class::all).freed, 4 * MiB);
  // A keeps its 4 MiB segment cached: reserved really was 8 MiB at once.
  EXPECT_EQ(merged(metric::reserved_bytes, size_class::all).current, 8 * MiB);
  EXPECT_EQ(merged(metric::reserved_bytes, size_class::all).peak, 8 * MiB);
  EXPECT_EQ(merged[counter::upstream_allocs], 2);
  EXPECT_EQ(merged[counter::cache_hits], 0);

  // A destroyed pool leaves the tracker's currents equal to the sum over the remaining pools.
  a.reset();
  EXPECT_EQ(peaks.current(metric::reserved_bytes, size_class::all), 4 * MiB);
  EXPECT_EQ(peaks.current(metric::allocated_bytes, size_class::all), 4 * MiB);
  peaks.reset_peak();
  EXPECT_EQ(peaks.peak(metric::reserved_bytes, size_class::all), 4 * MiB);
  b.deallocate(p);
}

}  // namespace
}  // namespace umem::alloc
