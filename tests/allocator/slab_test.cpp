// Small requests as objects of slabs (Note [Slabs] in thread_cache.hpp, Note [Slab segments] in
// caching_pool.hpp): where objects are, exact statistics, double and bad frees, frees on other
// threads, trim, running out, a thread's exit, the snapshot, and an upstream whose segments are not
// aligned to a slab. Expected values are worked out by hand: 64 KiB slabs of 256-byte granules in
// 2 MiB segments aligned to 64 KiB (fake_upstream's default alignment); objects of 256 to 4096
// bytes in steps of 256.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using namespace test;  // the shared test vocabulary (pool_test_support.hpp)

constexpr std::size_t slab_bytes = 64 * KiB;

pool_config cached() {
  pool_config c;
  c.thread_cache_bytes = 64 * MiB;
  return c;
}

const stat& gauge(const pool_stats& s, metric m, size_class c = size_class::all) { return s(m, c); }

std::uintptr_t at(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

struct object_counts {
  std::size_t live = 0, free = 0;
};

// Blocks of `size` bytes in the snapshot: live ones (allocated), free ones waiting in a slab.
object_counts objects_of(const pool_snapshot& s, std::size_t size) {
  object_counts n;
  for (const auto& seg : s.segments)
    for (const auto& b : seg.blocks)
      if (b.size == size) {
        if (b.allocated && !b.thread_cached) ++n.live;
        if (!b.allocated && b.thread_cached) ++n.free;
      }
  return n;
}

template <class F>
void on_other_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

TEST(slabs, small_requests_are_neighbouring_objects_counted_exactly) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* a = pool.allocate(200);
  void* b = pool.allocate(200);
  void* c = pool.allocate(200);
  EXPECT_EQ(at(a) % slab_bytes, 0u);  // the first object of the segment's first slab
  EXPECT_EQ(at(b), at(a) + 256);
  EXPECT_EQ(at(c), at(a) + 512);
  EXPECT_EQ(pool.block_size(b), 256u);
  pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 768);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).allocated, 768);  // objects, not the slab
  EXPECT_EQ(gauge(s, metric::allocation).current, 3);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 600);
  EXPECT_EQ(gauge(s, metric::requested_bytes, size_class::small_pool).current, 600);
  EXPECT_EQ(gauge(s, metric::allocation, size_class::large_pool).current, 0);
  EXPECT_EQ(gauge(s, metric::reserved_bytes).current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(gauge(s, metric::segment).current, 1);

  pool.deallocate(b);
  void* d = pool.allocate(100);
  EXPECT_EQ(d, b);  // the last freed object first
  EXPECT_EQ(gauge(pool.stats(), metric::requested_bytes).current, 500);
  for (void* p : {a, c, d}) pool.deallocate(p);
  s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).freed, 1024);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, 4);
  EXPECT_EQ(gauge(s, metric::allocation).freed, 4);
  EXPECT_EQ(gauge(s, metric::requested_bytes).freed, 700);
  EXPECT_EQ(up.allocate_calls(), 1u);
}

TEST(slabs, each_size_class_has_its_own_slab_and_larger_requests_take_blocks) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* o256 = pool.allocate(256);
  void* o512 = pool.allocate(300);
  void* o768 = pool.allocate(513);
  void* o1280 = pool.allocate(1025);
  void* o2048 = pool.allocate(2048);
  void* o2304 = pool.allocate(2049);
  void* o4096 = pool.allocate(4096);
  void* block = pool.allocate(4097);
  EXPECT_EQ(pool.block_size(o512), 512u);
  EXPECT_EQ(pool.block_size(o768), 768u);
  EXPECT_EQ(pool.block_size(o1280), 1280u);
  EXPECT_EQ(pool.block_size(o2048), 2048u);
  EXPECT_EQ(pool.block_size(o2304), 2304u);
  EXPECT_EQ(pool.block_size(o4096), 4096u);
  EXPECT_EQ(pool.block_size(block), 4352u);
  for (void* p : {o512, o768, o1280, o2048, o2304, o4096}) {
    EXPECT_EQ(at(p) % slab_bytes, 0u);
    EXPECT_NE(at(p) / slab_bytes, at(o256) / slab_bytes);
  }
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current,
            256 + 512 + 768 + 1280 + 2048 + 2304 + 4096 + 4352);
  EXPECT_EQ(up.allocate_calls(), 2u);  // one slab segment, one small segment for the block
  for (void* p : {o256, o512, o768, o1280, o2048, o2304, o4096, block}) pool.deallocate(p);
  EXPECT_EQ(gauge(pool.stats(), metric::allocation).current, 0);
}

TEST(slabs, the_257th_object_of_256_bytes_comes_from_a_second_slab_of_the_same_segment) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::vector<void*> p;
  for (int i = 0; i < 257; ++i) p.push_back(pool.allocate(256));
  EXPECT_EQ(at(p[255]), at(p[0]) + slab_bytes - 256);
  EXPECT_EQ(at(p[256]) / slab_bytes, at(p[0]) / slab_bytes + 1);
  EXPECT_EQ(up.allocate_calls(), 1u);
  EXPECT_EQ(gauge(pool.stats(), metric::allocation).current, 257);
  for (void* q : p) pool.deallocate(q);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
}

TEST(slabs, a_double_free_is_reported_on_any_thread_and_changes_nothing) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* keep = pool.allocate(256);
  void* p = pool.allocate(256);
  pool.deallocate(p);
  const pool_stats before = pool.stats();
  EXPECT_NE(error_of([&] { pool.deallocate(p); }, errc::invalid_argument).find("double free"),
            std::string::npos);
  on_other_thread([&] {
    EXPECT_NE(error_of([&] { pool.deallocate(p); }, errc::invalid_argument).find("double free"),
              std::string::npos);
  });
  const pool_stats after = pool.stats();
  EXPECT_EQ(gauge(after, metric::allocation).freed, gauge(before, metric::allocation).freed);
  EXPECT_EQ(gauge(after, metric::allocated_bytes).current, 256);
  EXPECT_EQ(pool.allocate(256), p);  // still free, once
  EXPECT_NE(pool.allocate(256), p);
  pool.deallocate(keep);
}

TEST(slabs, a_pointer_inside_an_object_is_no_allocation) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(512);
  auto* bytes = static_cast<char*>(p);
  EXPECT_NE(error_of([&] { pool.deallocate(bytes + 256); }, errc::invalid_argument)
                .find("not the start of an allocation"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pool.deallocate(bytes + 16); }, errc::invalid_argument)
                .find("not the start of an allocation"),
            std::string::npos);
  error_of([&] { (void)pool.block_size(bytes + 256); }, errc::invalid_argument);
  EXPECT_EQ(pool.block_size(p), 512u);
  pool.deallocate(p);
  error_of([&] { (void)pool.block_size(p); }, errc::invalid_argument);  // freed
}

TEST(slabs, an_object_freed_on_another_thread_counts_at_once_and_returns_to_its_slab) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::vector<void*> p;
  for (int i = 0; i < 256; ++i) p.push_back(pool.allocate(200));  // the slab, all of it
  on_other_thread([&] { pool.deallocate(p[5]); });
  pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 255 * 256);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 255 * 200);
  EXPECT_EQ(gauge(s, metric::allocation).freed, 1);
  void* again = pool.allocate(256);  // the active slab is empty: its remote free comes back
  EXPECT_EQ(again, p[5]);
  EXPECT_EQ(pool.block_size(again), 256u);
  p[5] = again;
  on_other_thread([&] {
    for (void* q : p) pool.deallocate(q);
  });
  s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, 257);
  EXPECT_EQ(gauge(s, metric::allocation).freed, 257);
  EXPECT_EQ(gauge(s, metric::requested_bytes).freed, 255 * 200 + 200 + 256);
  EXPECT_EQ(up.allocate_calls(), 1u);
}

TEST(slabs, trim_takes_a_living_thread_s_free_slabs_but_not_one_in_use) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::barrier sync(2);
  void* kept = nullptr;
  std::thread worker([&] {
    pool.deallocate(pool.allocate(256));  // a slab with no live object
    kept = pool.allocate(512);            // a slab in use
    pool.deallocate(pool.allocate(512));
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // main trimmed meanwhile
    pool.deallocate(pool.allocate(256));  // a new slab of the class
    pool.deallocate(kept);
  });
  sync.arrive_and_wait();
  EXPECT_EQ(objects_of(pool.snapshot(), 256).free, 256u);
  // The 256-byte slab goes back to its segment, which the 512-byte slab keeps: no bytes to the
  // upstream yet.
  EXPECT_EQ(pool.trim(), 0u);
  EXPECT_EQ(objects_of(pool.snapshot(), 256).free, 0u);
  EXPECT_EQ(objects_of(pool.snapshot(), 512).live, 1u);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 512);
  sync.arrive_and_wait();
  worker.join();  // its exit gives its slabs back
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, 4);
  EXPECT_EQ(gauge(s, metric::allocation).freed, 4);
  EXPECT_EQ(pool.trim(), 2 * MiB);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
}

TEST(slabs, objects_a_thread_left_live_at_its_exit_are_freed_through_the_pool) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::vector<void*> left;
  on_other_thread([&] {
    for (int i = 0; i < 3; ++i) left.push_back(pool.allocate(768));
    pool.deallocate(pool.allocate(768));
  });
  EXPECT_EQ(objects_of(pool.snapshot(), 768).live, 3u);
  EXPECT_EQ(pool.trim(), 0u);  // the slab holds live objects
  EXPECT_EQ(pool.block_size(left[1]), 768u);
  pool.deallocate(left[1]);
  EXPECT_NE(error_of([&] { pool.deallocate(left[1]); }, errc::invalid_argument).find("double free"),
            std::string::npos);
  pool.deallocate(left[0]);
  pool.deallocate(left[2]);  // the last one: the slab goes back to the segment
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).allocated, 4 * 768);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).freed, 4 * 768);
  EXPECT_EQ(objects_of(pool.snapshot(), 768).live + objects_of(pool.snapshot(), 768).free, 0u);
  EXPECT_EQ(pool.trim(), 2 * MiB);
}

TEST(slabs, the_snapshot_shows_each_object_live_with_its_request_or_waiting_in_its_slab) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* a = pool.allocate(400);
  void* b = pool.allocate(500);
  const pool_snapshot snap = pool.snapshot();
  ASSERT_EQ(snap.segments.size(), 1u);
  EXPECT_EQ(objects_of(snap, 512).live, 2u);
  EXPECT_EQ(objects_of(snap, 512).free, 126u);  // 64 KiB / 512 - 2
  std::size_t requested = 0, free_bytes = 0;
  for (const auto& blk : snap.segments[0].blocks) {
    requested += blk.requested;
    if (!blk.allocated && !blk.thread_cached) free_bytes += blk.size;
  }
  EXPECT_EQ(requested, 900u);
  EXPECT_EQ(free_bytes, 2 * MiB - slab_bytes);  // the rest of the segment, one free block
  pool.deallocate(a);
  pool.deallocate(b);
}

TEST(slabs, running_out_takes_free_slabs_back_and_retries) {
  fake_upstream up(2 * MiB);  // one segment in all
  caching_pool pool(up, node0, coherence::fine, cached());
  std::barrier sync(2);
  std::thread worker([&] {
    pool.deallocate(pool.allocate(1024));  // a free slab keeps the segment
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  });
  sync.arrive_and_wait();
  void* big = pool.allocate(2 * MiB);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 0);
  EXPECT_EQ(s[counter::upstream_frees], 1);
  sync.arrive_and_wait();
  worker.join();
  pool.deallocate(big);
}

TEST(slabs, no_room_for_a_slab_is_out_of_memory_naming_the_limit) {
  pool_config c = cached();
  c.limit_bytes = 2 * MiB;
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, c);
  void* held = pool.allocate(2 * MiB);
  const std::string why = error_of([&] { pool.allocate(256); }, errc::out_of_memory);
  EXPECT_NE(why.find("limit"), std::string::npos) << why;
  EXPECT_EQ(pool.stats()[counter::num_ooms], 1);
  pool.deallocate(held);
  pool.deallocate(pool.allocate(256));
}

TEST(slabs, peaks_include_at_most_the_free_part_of_the_threads_slabs) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::vector<void*> p;
  for (int i = 0; i < 10; ++i) p.push_back(pool.allocate(256));
  for (void* q : p) pool.deallocate(q);
  const stat bytes = gauge(pool.stats(), metric::allocated_bytes);
  EXPECT_GE(bytes.peak, 10 * 256);
  EXPECT_LE(bytes.peak, static_cast<std::int64_t>(slab_bytes));
  pool.reset_peak_stats();  // takes the free slab back first
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).peak, 0);
}

// Segments 4 KiB past a 64 KiB boundary: aligned to the pool's 256 bytes, never to a slab.
class unaligned_upstream final : public upstream_source {
 public:
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override {
    segment s = inner_.allocate(bytes + 4 * KiB, where, kind);
    const segment inner = s;
    s.base = static_cast<char*>(s.base) + 4 * KiB;
    s.size = bytes;
    inner_segments_.emplace(s.base, inner);
    return s;
  }
  void deallocate(const segment& s) noexcept override {
    const auto it = inner_segments_.find(s.base);
    inner_.deallocate(it->second);
    inner_segments_.erase(it);
  }
  std::string describe() const override { return "unaligned upstream"; }
  std::size_t allocate_calls() const { return inner_.allocate_calls(); }

 private:
  fake_upstream inner_;
  std::map<void*, segment> inner_segments_;
};

TEST(slabs, an_upstream_not_aligned_to_a_slab_gets_blocks_that_threads_still_reuse) {
  unaligned_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(256);
  void* keep = pool.allocate(256);
  pool.deallocate(p);
  EXPECT_EQ(pool.allocate(200), p);
  // `keep` came from the segment's free block, the second `p` from the thread's bin.
  EXPECT_EQ(pool.stats()[counter::cache_hits], 2);
  pool.deallocate(p);
  pool.deallocate(keep);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
  EXPECT_EQ(up.allocate_calls(), 2u);  // the refused slab segment, then the small segment
}

// Threads allocate small objects of every class, hand half of them to another thread to free,
// while a third thread trims: every object stays its holder's (a pattern written in it survives),
// and the statistics end at zero with every allocation freed once.
TEST(slabs, stress_with_frees_on_other_threads_and_concurrent_trims) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  constexpr int threads = 4;
  constexpr int rounds = 4000;
  std::mutex handoff_mutex;
  std::vector<std::pair<void*, std::uint64_t>> handoff;
  std::atomic<bool> stop{false};
  std::atomic<int> corrupted{0};
  auto check_and_free = [&](void* q, std::uint64_t tag) {
    if (*static_cast<std::uint64_t*>(q) != tag) corrupted.fetch_add(1);
    pool.deallocate(q);
  };
  std::thread trimmer([&] {
    while (!stop.load()) pool.trim();
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::vector<std::pair<void*, std::uint64_t>> mine;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t size = 1 + rng() % 4096;
        void* q = pool.allocate(size);
        const std::uint64_t tag = (static_cast<std::uint64_t>(t) << 32) | static_cast<unsigned>(i);
        *static_cast<std::uint64_t*>(q) = tag;
        if (rng() % 2 == 0) {
          std::lock_guard lock(handoff_mutex);
          handoff.emplace_back(q, tag);
        } else {
          mine.emplace_back(q, tag);
        }
        if (mine.size() > 64) {
          check_and_free(mine.front().first, mine.front().second);
          mine.erase(mine.begin());
        }
        std::vector<std::pair<void*, std::uint64_t>> theirs;
        {
          std::lock_guard lock(handoff_mutex);
          if (handoff.size() > 32) theirs.swap(handoff);
        }
        for (auto [r, tg] : theirs) check_and_free(r, tg);
      }
      for (auto [r, tg] : mine) check_and_free(r, tg);
    });
  for (auto& w : workers) w.join();
  for (auto [r, tg] : handoff) check_and_free(r, tg);
  stop.store(true);
  trimmer.join();
  EXPECT_EQ(corrupted.load(), 0);
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, threads * rounds);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 0);
  pool.trim();
  EXPECT_EQ(up.outstanding_bytes(), 0u);
}

}  // namespace
}  // namespace umem::alloc
