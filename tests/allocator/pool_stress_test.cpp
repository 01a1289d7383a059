// Concurrency stress: threads allocate and free random sizes, some blocks are freed by another
// thread than the one that allocated them, and every block carries a payload written after
// allocate and verified before free, so two live blocks that overlap are caught. Run under
// ThreadSanitizer in CI as well; nothing here asserts on timing.
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_upstream.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

struct live_alloc {
  std::uint64_t* words = nullptr;
  std::size_t bytes = 0;
  std::uint64_t tag = 0;
};

// A payload unique to `tag` in every word, so a block overwritten by another block shows.
std::uint64_t word(std::uint64_t tag, std::size_t i) {
  return (tag * 0x9e3779b97f4a7c15ull) ^ (i * 0xbf58476d1ce4e5b9ull) ^ 0x94d049bb133111ebull;
}

void fill(const live_alloc& a) {
  for (std::size_t i = 0; i < a.bytes / sizeof(std::uint64_t); ++i) a.words[i] = word(a.tag, i);
}

// Index of the first corrupted word, or SIZE_MAX.
std::size_t first_bad_word(const live_alloc& a) {
  for (std::size_t i = 0; i < a.bytes / sizeof(std::uint64_t); ++i)
    if (a.words[i] != word(a.tag, i)) return i;
  return SIZE_MAX;
}

// Mostly small, some medium, a few large (up to 3 MiB), so both size classes, splitting,
// coalescing and whole-segment release all happen.
std::size_t random_size(std::mt19937_64& rng) {
  const auto pick = std::uniform_int_distribution<int>(0, 99)(rng);
  if (pick < 70) return std::uniform_int_distribution<std::size_t>(8, 4 * KiB)(rng);
  if (pick < 97) return std::uniform_int_distribution<std::size_t>(4 * KiB, 1200 * KiB)(rng);
  return std::uniform_int_distribution<std::size_t>(1 * MiB, 3 * MiB)(rng);
}

TEST(caching_pool_stress, threads_never_get_overlapping_blocks) {
  constexpr int threads = 4;
  constexpr int ops_per_thread = 2000;
  constexpr std::size_t max_live_per_thread = 32;

  fake_upstream up;
  pool_config cfg;
  cfg.max_cached_bytes = 8 * MiB;  // frees also return segments now and then
  global_peak_tracker peaks;
  caching_pool pool(up, node_binding{bind_mode::bind, {0}}, coherence::fine, cfg, &peaks);

  std::mutex exchange_mutex;  // blocks handed from one thread to another to free
  std::vector<live_alloc> exchange;
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto fail = [&](std::string what) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(std::move(what));
  };

  auto check_and_free = [&](const live_alloc& a) {
    if (const std::size_t bad = first_bad_word(a); bad != SIZE_MAX)
      fail("block of tag " + std::to_string(a.tag) + " (" + std::to_string(a.bytes) +
           " bytes) corrupted at word " + std::to_string(bad));
    if (pool.block_size(a.words) < a.bytes) fail("block_size below the request");
    pool.deallocate(a.words);
  };

  auto worker = [&](int id) {
    std::mt19937_64 rng(static_cast<std::uint64_t>(id) * 7919 + 1);
    std::vector<live_alloc> mine;
    for (int op = 0; op < ops_per_thread; ++op) {
      const auto action = std::uniform_int_distribution<int>(0, 9)(rng);
      if (action < 5 || mine.empty()) {
        if (mine.size() == max_live_per_thread) {
          check_and_free(mine.back());
          mine.pop_back();
        }
        live_alloc a;
        a.bytes = random_size(rng);
        a.tag = (static_cast<std::uint64_t>(id) << 32) | static_cast<std::uint64_t>(op);
        a.words = static_cast<std::uint64_t*>(pool.allocate(a.bytes));
        if (reinterpret_cast<std::uintptr_t>(a.words) % cfg.alignment != 0)
          fail("misaligned block");
        fill(a);
        mine.push_back(a);
      } else if (action < 9) {
        const auto i = std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng);
        check_and_free(mine[i]);
        mine[i] = mine.back();
        mine.pop_back();
      } else {
        // Hand one block to whoever comes next; free one handed over by someone else.
        live_alloc theirs;
        {
          std::lock_guard lock(exchange_mutex);
          exchange.push_back(mine.back());
          if (exchange.size() > 1) {
            theirs = exchange.front();
            exchange.erase(exchange.begin());
          }
        }
        mine.pop_back();
        if (theirs.words) check_and_free(theirs);
      }
    }
    for (const live_alloc& a : mine) check_and_free(a);
  };

  std::vector<std::thread> pool_threads;
  for (int t = 0; t < threads; ++t) pool_threads.emplace_back(worker, t);
  for (std::thread& t : pool_threads) t.join();
  for (const live_alloc& a : exchange) check_and_free(a);

  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();

  pool_stats s = pool.stats();
  EXPECT_EQ(s(metric::allocated_bytes, size_class::all).current, 0);
  EXPECT_EQ(s(metric::requested_bytes, size_class::all).current, 0);
  EXPECT_EQ(s(metric::allocation, size_class::all).current, 0);
  EXPECT_EQ(s(metric::allocation, size_class::all).allocated,
            s(metric::allocation, size_class::all).freed);
  EXPECT_GT(s(metric::allocation, size_class::all).allocated, threads * ops_per_thread / 3);
  EXPECT_GT(s[counter::cache_hits], 0);
  EXPECT_GT(s(metric::allocated_bytes, size_class::small_pool).allocated, 0);
  EXPECT_GT(s(metric::allocated_bytes, size_class::large_pool).allocated, 0);
  // Reserved is exactly what the upstream still holds for the pool.
  EXPECT_EQ(s(metric::reserved_bytes, size_class::all).current,
            static_cast<std::int64_t>(up.outstanding_bytes()));
  EXPECT_EQ(s[counter::upstream_allocs], static_cast<std::int64_t>(up.allocate_calls()));

  // Everything left is cache; trim returns all of it: no leak.
  const std::size_t held = up.outstanding_bytes();
  EXPECT_EQ(pool.trim(), held);
  s = pool.stats();
  EXPECT_EQ(s(metric::reserved_bytes, size_class::all).current, 0);
  EXPECT_EQ(s(metric::segment, size_class::all).current, 0);
  EXPECT_EQ(up.outstanding_bytes(), 0u);
  EXPECT_EQ(up.allocate_calls(), up.deallocate_calls());
  EXPECT_EQ(up.bad_deallocates(), 0u);
  EXPECT_TRUE(pool.snapshot().segments.empty());
  // The global tracker saw every change: its currents equal the pool's.
  EXPECT_EQ(peaks.current(metric::reserved_bytes, size_class::all), 0);
  EXPECT_EQ(peaks.peak(metric::allocated_bytes, size_class::all),
            s(metric::allocated_bytes, size_class::all).peak);
}

}  // namespace
}  // namespace umem::alloc
