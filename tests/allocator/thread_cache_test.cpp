// The pool's per-thread caches (Note [Fast path], Note [Thread cache]): reuse without the lock,
// double frees on the same and on other threads, frees on another thread, the way cached blocks
// get back to the pool (trim, running out, thread exit, capacity), and exact statistics.
// Expected values are worked out by hand from pool_config's defaults (256 B alignment, 1 MiB
// small threshold, 2 MiB segments).
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
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

pool_config cached(std::size_t capacity = 64 * MiB) {
  pool_config c;
  c.thread_cache_bytes = capacity;
  return c;
}

const stat& gauge(const pool_stats& s, metric m, size_class c = size_class::all) { return s(m, c); }

std::string misuse_of(auto&& f) { return error_of(f, errc::invalid_argument); }

// Runs f on a new thread and waits for it (the thread then exits, see thread_exit tests).
template <class F>
void on_other_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

std::size_t count_state(const pool_snapshot& s, bool thread_cached, bool allocated) {
  std::size_t n = 0;
  for (const auto& seg : s.segments)
    for (const auto& b : seg.blocks)
      if (b.thread_cached == thread_cached && b.allocated == allocated) ++n;
  return n;
}

// Whether a block that callers hold (allocated, not thread-cached) starts at `p`.
bool held_by_caller(const pool_snapshot& s, const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& seg : s.segments)
    for (const auto& b : seg.blocks)
      if (seg.base + b.offset == address) return b.allocated && !b.thread_cached;
  return false;
}

TEST(thread_cache, a_freed_block_is_reused_by_its_thread_and_counted_as_free) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(6000);  // 6144-byte block (above the slabs' objects)
  pool.deallocate(p);
  pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).freed, 6144);
  EXPECT_EQ(gauge(s, metric::allocation).current, 0);
  EXPECT_EQ(gauge(s, metric::reserved_bytes).current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 1u);  // the block, cached
  EXPECT_NE(to_json(pool.snapshot()).find(R"("state":"thread_cached")"), std::string::npos);

  void* q = pool.allocate(5900);  // same 6144-byte block from the cache
  EXPECT_EQ(q, p);
  EXPECT_EQ(pool.block_size(q), 6144u);
  s = pool.stats();
  EXPECT_EQ(s[counter::cache_hits], 1);  // the first allocation needed a segment
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 6144);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).allocated, 12288);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 5900);
  EXPECT_EQ(gauge(s, metric::requested_bytes, size_class::small_pool).current, 5900);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, 2);
  EXPECT_EQ(up.allocate_calls(), 1u);
  pool.deallocate(q);
  EXPECT_EQ(gauge(pool.stats(), metric::requested_bytes).current, 0);
  EXPECT_EQ(gauge(pool.stats(), metric::requested_bytes).freed, 11900);
}

TEST(thread_cache, a_larger_request_of_the_same_class_is_not_served_by_a_smaller_block) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  // 4352 and 4608 bytes share the class (4 KiB, 4.5 KiB]; the cached 4352 block cannot serve 4608.
  void* small = pool.allocate(4352);
  pool.deallocate(small);
  void* larger = pool.allocate(4608);
  EXPECT_NE(larger, small);
  EXPECT_GE(pool.block_size(larger), 4608u);
  void* again = pool.allocate(4352);
  EXPECT_EQ(again, small);
  pool.deallocate(larger);
  pool.deallocate(again);
}

// A bin is a stack of eight: its top and seven below (Note [Thread cache fast path]). Each hit
// hands out the top and moves the next one up; the ninth free finds the bin full.
TEST(thread_cache, a_bin_keeps_eight_blocks_and_hands_out_the_last_freed_first) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::vector<void*> p;
  for (int i = 0; i < 9; ++i) p.push_back(pool.allocate(8 * KiB));
  for (void* q : p) pool.deallocate(q);
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 8u);  // the ninth went to the pool
  const std::int64_t hits_before = pool.stats()[counter::cache_hits];
  for (int i = 7; i >= 0; --i) {
    void* q = pool.allocate(8000);
    EXPECT_EQ(q, p[static_cast<std::size_t>(i)]) << "hit " << 8 - i;
    EXPECT_EQ(pool.block_size(q), 8 * KiB);
  }
  pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::cache_hits], hits_before + 8);
  EXPECT_EQ(gauge(s, metric::allocation).current, 8);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 8 * 8000);
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 0u);
  for (int i = 0; i < 8; ++i) pool.deallocate(p[static_cast<std::size_t>(i)]);
  s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocation).current, 0);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).freed, static_cast<std::int64_t>(17 * 8 * KiB));
  EXPECT_EQ(pool.trim(), 2 * MiB);  // every block back: one free segment
}

TEST(thread_cache, double_free_on_the_same_thread_is_reported_and_changes_nothing) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(8192);
  pool.deallocate(p);
  const pool_stats before = pool.stats();
  EXPECT_NE(misuse_of([&] { pool.deallocate(p); }).find("double free"), std::string::npos);
  EXPECT_EQ(pool.stats(), before);
  EXPECT_EQ(pool.allocate(8192), p);  // handed out once, not twice
  EXPECT_NE(pool.allocate(8192), p);
}

TEST(thread_cache, double_free_on_another_thread_is_reported) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(8192);
  pool.deallocate(p);  // now in this thread's cache
  std::string message;
  on_other_thread([&] { message = misuse_of([&] { pool.deallocate(p); }); });
  EXPECT_NE(message.find("double free"), std::string::npos) << message;
  EXPECT_NE(message.find("thread's cache"), std::string::npos) << message;
  EXPECT_EQ(pool.allocate(8192), p);
}

TEST(thread_cache, a_block_freed_on_another_thread_goes_back_to_the_pool_once) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(3000);
  on_other_thread([&] { pool.deallocate(p); });
  EXPECT_EQ(count_state(pool.snapshot(), false, true), 0u);  // nothing allocated
  // This thread still remembers handing p out; its free must not succeed a second time.
  EXPECT_NE(misuse_of([&] { pool.deallocate(p); }).find("double free"), std::string::npos);
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).freed, 1);
}

TEST(thread_cache, a_cache_hit_freed_on_another_thread_keeps_requested_bytes_exact) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(1000);
  pool.deallocate(p);
  void* q = pool.allocate(800);  // cache hit, new request size
  ASSERT_EQ(q, p);
  EXPECT_EQ(gauge(pool.stats(), metric::requested_bytes).current, 800);
  on_other_thread([&] { pool.deallocate(q); });  // the locked path frees the 800-byte request
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::requested_bytes).allocated, 1800);
  EXPECT_EQ(gauge(s, metric::requested_bytes).freed, 1800);
}

TEST(thread_cache, trim_takes_blocks_back_from_a_living_thread) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::barrier sync(2);
  void* p = nullptr;
  std::thread worker([&] {
    p = pool.allocate(68 * KiB);
    pool.deallocate(p);  // cached by the worker
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // main trimmed meanwhile
    void* again = pool.allocate(68 * KiB);
    pool.deallocate(again);
  });
  sync.arrive_and_wait();
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 1u);
  EXPECT_EQ(pool.trim(), 2 * MiB);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
  EXPECT_EQ(pool.snapshot().segments.size(), 0u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).freed, static_cast<std::int64_t>(68 * KiB));
  sync.arrive_and_wait();
  worker.join();  // the worker's cache was emptied: its allocation needed a new segment
  EXPECT_EQ(up.allocate_calls(), 2u);
}

// After a trim emptied a bin behind its owner's back, the owner's view of it (a top and one
// block below) is stale: its next free must start the bin afresh and its allocations must never
// hand out the blocks the trim took.
TEST(thread_cache, a_bin_emptied_by_a_trim_is_refilled_and_serves_only_new_blocks) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  std::barrier sync(2);
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* hit = nullptr;
  void* miss = nullptr;
  bool pool_handed_out_miss = false;
  std::thread worker([&] {
    a = pool.allocate(8 * KiB);
    b = pool.allocate(8 * KiB);
    c = pool.allocate(8 * KiB);
    pool.deallocate(a);
    pool.deallocate(b);  // the bin: b on top of a
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // main trimmed meanwhile
    pool.deallocate(c);
    hit = pool.allocate(8 * KiB);
    miss = pool.allocate(8 * KiB);
    pool_handed_out_miss = held_by_caller(pool.snapshot(), miss);  // not a taken block's ghost
    pool.deallocate(hit);
    pool.deallocate(miss);
  });
  sync.arrive_and_wait();
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 2u);
  pool.trim();  // takes a and b out of the worker's bin; c keeps the segment
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 0u);
  sync.arrive_and_wait();
  worker.join();
  EXPECT_EQ(hit, c) << "c went into the emptied bin and came back out";
  EXPECT_NE(miss, c);
  EXPECT_TRUE(pool_handed_out_miss) << "the pool's own block, as the pool knows it";
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocation).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, 5);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
}

TEST(thread_cache, a_thread_returns_its_blocks_when_it_exits) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  on_other_thread([&] {
    for (std::size_t size : {256 * KiB, 512 * KiB, 8 * KiB}) pool.deallocate(pool.allocate(size));
  });
  const pool_snapshot snap = pool.snapshot();
  EXPECT_EQ(count_state(snap, true, false), 0u);
  ASSERT_EQ(snap.segments.size(), 1u);
  ASSERT_EQ(snap.segments[0].blocks.size(), 1u);  // merged back into one free block
  EXPECT_FALSE(snap.segments[0].blocks[0].allocated);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
}

TEST(thread_cache, running_out_takes_cached_blocks_back_and_retries) {
  fake_upstream up(2 * MiB);  // one segment in all
  caching_pool pool(up, node0, coherence::fine, cached());
  std::barrier sync(2);
  std::thread worker([&] {
    pool.deallocate(pool.allocate(512 * KiB));  // cached: the segment is not free
    sync.arrive_and_wait();
    sync.arrive_and_wait();
  });
  sync.arrive_and_wait();
  void* big = pool.allocate(2 * MiB);  // needs the worker's segment back
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 0);
  EXPECT_EQ(s[counter::upstream_frees], 1);
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, static_cast<std::int64_t>(2 * MiB));
  sync.arrive_and_wait();
  worker.join();
  pool.deallocate(big);
}

TEST(thread_cache, a_failure_after_taking_cached_blocks_back_counts_one_oom) {
  fake_upstream up(2 * MiB);
  caching_pool pool(up, node0, coherence::fine, cached());
  void* held = pool.allocate(512 * KiB);
  pool.deallocate(pool.allocate(8 * KiB));  // cached
  try {
    pool.allocate(2 * MiB);
    ADD_FAILURE() << "expected out_of_memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
  }
  EXPECT_EQ(pool.stats()[counter::num_ooms], 1);
  pool.deallocate(held);
}

TEST(thread_cache, frees_beyond_the_capacity_go_back_to_the_pool) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached(1 * MiB));
  void* a = pool.allocate(768 * KiB);
  void* b = pool.allocate(768 * KiB);
  pool.deallocate(a);  // cached: 768 KiB <= 1 MiB
  pool.deallocate(b);  // would make 1.5 MiB: freed into the pool
  const pool_snapshot snap = pool.snapshot();
  EXPECT_EQ(count_state(snap, true, false), 1u);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
}

// A trim takes cached blocks behind the owner's back; the capacity they used is the owner's
// again at its next free, and the capacity still holds after that.
TEST(thread_cache, the_capacity_a_trim_empties_is_the_thread_s_again) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached(1 * MiB));
  std::barrier sync(2);
  std::size_t cached_after_trim = 0;
  std::size_t cached_at_the_end = 0;
  std::thread worker([&] {
    void* a = pool.allocate(768 * KiB);
    void* b = pool.allocate(768 * KiB);
    void* c = pool.allocate(768 * KiB);
    pool.deallocate(a);  // cached: 256 KiB of the capacity left
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // main trimmed: a is the pool's again
    pool.deallocate(b);      // cached, since a no longer counts
    cached_after_trim = count_state(pool.snapshot(), true, false);
    pool.deallocate(c);  // b fills the capacity: c goes to the pool
    cached_at_the_end = count_state(pool.snapshot(), true, false);
  });
  sync.arrive_and_wait();
  pool.trim();
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 0u);
  sync.arrive_and_wait();
  worker.join();
  EXPECT_EQ(cached_after_trim, 1u);
  EXPECT_EQ(cached_at_the_end, 1u);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
}

TEST(thread_cache, blocks_above_64_mib_are_never_cached) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached(std::size_t{1} << 30));
  pool.deallocate(pool.allocate(65 * MiB));
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 0u);
  EXPECT_EQ(pool.trim(), 66 * MiB);
}

TEST(thread_cache, a_big_block_is_reused_by_its_thread_while_it_hits) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* p = pool.allocate(8 * MiB);
  for (int i = 0; i < 3; ++i) {
    pool.deallocate(p);
    EXPECT_EQ(count_state(pool.snapshot(), true, false), 1u);  // held by this thread
    void* q = pool.allocate(8 * MiB);
    EXPECT_EQ(q, p);
    p = q;
  }
  EXPECT_EQ(pool.stats()[counter::cache_hits], 3);
  pool.deallocate(p);
}

TEST(thread_cache, a_big_miss_gives_the_threads_big_blocks_back_to_the_pool_first) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached());
  void* small = pool.allocate(8 * KiB);
  void* a = pool.allocate(6 * MiB);
  void* b = pool.allocate(10 * MiB);
  pool.deallocate(small);
  pool.deallocate(a);
  pool.deallocate(b);
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 3u);  // all three in this thread's bins
  const std::size_t segments = up.allocate_calls();
  // 5 MiB: no bin holds it. The big blocks go back to the pool, which serves the request from
  // the 6 MiB one instead of a new segment; the small block stays cached.
  void* c = pool.allocate(5 * MiB);
  EXPECT_EQ(c, a);
  EXPECT_EQ(up.allocate_calls(), segments);
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 1u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, static_cast<std::int64_t>(pool.block_size(c)));
  EXPECT_EQ(gauge(s, metric::allocation).current, 1);
  pool.deallocate(c);
  EXPECT_EQ(gauge(pool.stats(), metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(pool.stats(), metric::allocation).current, 0);
}

TEST(thread_cache, a_thread_may_outlive_the_pool_its_cache_belongs_to) {
  fake_upstream up;
  std::barrier sync(2);
  auto pool = std::make_unique<caching_pool>(up, node0, coherence::fine, cached());
  std::thread worker([&] {
    pool->deallocate(pool->allocate(8 * KiB));
    sync.arrive_and_wait();
    sync.arrive_and_wait();  // the pool is gone; exiting must not touch it
  });
  sync.arrive_and_wait();
  pool.reset();
  EXPECT_EQ(up.outstanding_bytes(), 0u);
  sync.arrive_and_wait();
  worker.join();
  // A new pool (perhaps at the same address) starts with an empty cache for this thread.
  caching_pool next(up, node0, coherence::fine, cached());
  void* p = next.allocate(8 * KiB);
  EXPECT_EQ(next.stats()[counter::cache_hits], 0);
  next.deallocate(p);
}

TEST(thread_cache, off_means_every_free_goes_to_the_pool) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached(0));
  pool.deallocate(pool.allocate(8 * KiB));
  EXPECT_EQ(count_state(pool.snapshot(), true, false), 0u);
  EXPECT_EQ(pool.stats()[counter::cache_hits], 0);
}

// Peaks are the pool's own (Note [Statistics with thread caches]): a cached block still counts.
TEST(thread_cache, peaks_are_exact_without_caches_and_bounded_by_them_with) {
  for (std::size_t capacity : {std::size_t{0}, 64 * MiB}) {
    fake_upstream up;
    caching_pool pool(up, node0, coherence::fine, cached(capacity));
    void* a = pool.allocate(8 * KiB);
    pool.deallocate(a);
    void* b = pool.allocate(16 * KiB);  // a is cached (capacity != 0) while b is handed out
    const std::int64_t peak = gauge(pool.stats(), metric::allocated_bytes).peak;
    EXPECT_EQ(peak, static_cast<std::int64_t>(capacity == 0 ? 16 * KiB : 24 * KiB)) << capacity;
    pool.deallocate(b);
  }
}

// Threads allocate, hand some blocks to a neighbour to free, free the rest themselves, while
// another thread trims (taking blocks out of their caches) over and over: every block keeps its
// payload while held, none is handed out twice, and the statistics add up at the end. Run under
// ThreadSanitizer in CI.
TEST(thread_cache, stress_with_cross_thread_frees_and_concurrent_trims) {
  fake_upstream up;
  caching_pool pool(up, node0, coherence::fine, cached(4 * MiB));
  constexpr int workers = 4;
  constexpr int rounds = 3000;
  struct mailbox {
    std::mutex m;
    std::deque<std::pair<unsigned char*, unsigned char>> blocks;
  };
  std::vector<mailbox> boxes(workers);
  std::atomic<int> running{workers};
  std::atomic<long> handed_out{0};
  auto check_and_free = [&](unsigned char* p, unsigned char mark) {
    EXPECT_EQ(p[0], mark) << "a block was handed to two holders";
    EXPECT_EQ(p[63], mark);
    pool.deallocate(p);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < workers; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, unsigned char>> mine;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t bytes = std::size_t{256} << ((i * 7 + t) % 12);  // 256 B .. 512 KiB
        auto* p = static_cast<unsigned char*>(pool.allocate(bytes));
        handed_out.fetch_add(1);
        const auto mark = static_cast<unsigned char>(t * 31 + i);
        std::memset(p, mark, 64);
        if (i % 3 == 0) {
          std::lock_guard lock(boxes[(t + 1) % workers].m);
          boxes[(t + 1) % workers].blocks.emplace_back(p, mark);
        } else {
          mine.emplace_back(p, mark);
        }
        if (mine.size() > 6) {
          check_and_free(mine.front().first, mine.front().second);
          mine.erase(mine.begin());
        }
        std::deque<std::pair<unsigned char*, unsigned char>> inbox;
        {
          std::lock_guard lock(boxes[t].m);
          inbox.swap(boxes[t].blocks);
        }
        for (auto [q, m] : inbox) check_and_free(q, m);
      }
      for (auto [q, m] : mine) check_and_free(q, m);
      running.fetch_sub(1);
    });
  std::thread trimmer([&] {
    while (running.load() > 0) {
      pool.trim();
      std::this_thread::yield();
    }
  });
  for (auto& th : threads) th.join();
  trimmer.join();
  for (auto& box : boxes)
    for (auto [q, m] : box.blocks) check_and_free(q, m);
  const pool_stats s = pool.stats();
  EXPECT_EQ(gauge(s, metric::allocation).current, 0);
  EXPECT_EQ(gauge(s, metric::allocation).allocated, handed_out.load());
  EXPECT_EQ(gauge(s, metric::allocation).freed, handed_out.load());
  EXPECT_EQ(gauge(s, metric::allocated_bytes).current, 0);
  EXPECT_EQ(gauge(s, metric::requested_bytes).current, 0);
  pool.trim();
  EXPECT_EQ(up.outstanding_bytes(), 0u) << "a block stayed allocated or cached";
}

}  // namespace
}  // namespace umem::alloc
