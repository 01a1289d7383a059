// The torch bridge's CPU tensors (allocate_host, Note [Host path] in bridge.hpp): their own lock,
// live blocks and statistics, next to the GPU blocks'. Threads allocate and free CPU tensors
// (each other's too) while others use the GPU path and read statistics (run under TSan in CI);
// the statistics stay exact, the GPUs' and the host's add up for all_devices, and either free
// takes either kind of block. A CPU tensor's block a stream transfers from waits for that stream
// before it is reused (Note [Host blocks in flight]).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "torch_bridge/bridge_fixture.hpp"
#include "umem/core/error.hpp"
#include "umem/machine/stream_event.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace {

using namespace umem;
using torch_bridge::bridge;
using umem::torch_bridge::test::fixture;

void* stream0() { return reinterpret_cast<void*>(std::uintptr_t{0x1000}); }

TEST(bridge_host, cpu_tensors_from_threads_stay_apart_and_count_exactly) {
  fixture f;
  constexpr int threads = 4;
  constexpr int rounds = 4000;
  std::atomic<int> corrupted{0};
  std::atomic<bool> done{false};
  std::mutex handed_mutex;
  std::vector<std::pair<unsigned char*, unsigned char>> handed;  // freed by another thread
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 100));
      std::vector<std::pair<unsigned char*, unsigned char>> mine;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t n = rng() % 8 == 0 ? (64u << 10) + rng() % (2u << 20) : 1 + rng() % 4096;
        auto* p = static_cast<unsigned char*>(f.b->allocate_host(n, -1));
        const auto mark = static_cast<unsigned char>(t * 64 + i % 64);
        std::memset(p, mark, std::min<std::size_t>(n, 256));
        if (i % 5 == 0) {
          const std::lock_guard lock(handed_mutex);
          if (!handed.empty() && rng() % 2 == 0) {  // another thread's block
            const auto [q, m] = handed.back();
            handed.pop_back();
            if (q[0] != m) corrupted.fetch_add(1);
            f.b->deallocate_host(q);
          }
          handed.emplace_back(p, mark);
          continue;
        }
        mine.emplace_back(p, mark);
        if (mine.size() > 16) {
          const std::size_t k = rng() % mine.size();
          if (mine[k].first[0] != mine[k].second) corrupted.fetch_add(1);
          f.b->deallocate_host(mine[k].first);
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (const auto& [p, m] : mine) f.b->deallocate_host(p);
    });
  // The GPU path and the statistics at the same time.
  std::thread gpu([&] {
    while (!done.load()) {
      void* p = f.b->allocate(4096, 0, stream0());
      (void)f.b->memory_stats(bridge::all_devices);
      (void)f.b->stats(bridge::host);
      f.b->deallocate(p);
    }
  });
  for (auto& w : workers) w.join();
  done.store(true);
  gpu.join();

  EXPECT_EQ(corrupted.load(), 0);
  const torch_bridge::device_stats s = f.b->stats(bridge::host);
  EXPECT_EQ(s.allocation[0].current, static_cast<std::int64_t>(handed.size()));
  EXPECT_EQ(s.allocation[0].allocated, threads * rounds);
  for (const auto& [p, m] : handed) {
    EXPECT_EQ(p[0], m);
    f.b->deallocate_host(p);
  }
  const torch_bridge::device_stats after = f.b->stats(bridge::host);
  EXPECT_EQ(after.allocation[0].current, 0);
  EXPECT_EQ(after.allocated_bytes[0].current, 0);
  EXPECT_EQ(after.requested_bytes[0].current, 0);
  EXPECT_EQ(after.active_bytes[0].current, 0);
  EXPECT_EQ(f.b->stats(0).allocation[0].current, 0);
}

TEST(bridge_host, statistics_of_the_host_and_of_everything) {
  fixture f;
  void* h = f.b->allocate_host(1000, -1);  // PyTorch's rounding: 1024 bytes
  void* g = f.b->allocate(3000, 0, stream0());  // 3072
  const auto host = f.b->memory_stats(bridge::host);
  EXPECT_EQ(host.at("allocated_bytes.all.current"), 1024);
  EXPECT_EQ(host.at("requested_bytes.all.current"), 1000);
  EXPECT_EQ(host.at("allocation.small_pool.current"), 1);
  EXPECT_EQ(f.b->memory_stats(0).at("allocated_bytes.all.current"), 3072);
  auto all = f.b->memory_stats(bridge::all_devices);
  EXPECT_EQ(all.at("allocated_bytes.all.current"), 1024 + 3072);
  EXPECT_EQ(all.at("allocation.all.current"), 2);
  EXPECT_EQ(all.at("requested_bytes.all.allocated"), 4000);

  f.b->deallocate_host(h);
  void* h2 = f.b->allocate_host(600, -1);  // 1024 again: the host's peak stays 1024
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocated_bytes.all.peak"), 1024);
  all = f.b->memory_stats(bridge::all_devices);
  EXPECT_EQ(all.at("allocated_bytes.all.current"), 1024 + 3072);
  EXPECT_EQ(all.at("allocated_bytes.all.peak"), 1024 + 3072);  // the two peaks added
  EXPECT_EQ(all.at("allocation.all.allocated"), 3);
  EXPECT_EQ(all.at("allocation.all.freed"), 1);

  f.b->deallocate_host(h2);
  f.b->reset_peak_stats(bridge::host);
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocated_bytes.all.peak"), 0);
  EXPECT_EQ(f.b->memory_stats(0).at("allocated_bytes.all.peak"), 3072);
  EXPECT_EQ(f.b->memory_stats(bridge::all_devices).at("allocated_bytes.all.peak"), 3072);
  f.b->reset_accumulated_stats(bridge::all_devices);
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocation.all.allocated"), 0);
  EXPECT_EQ(f.b->memory_stats(0).at("allocation.all.allocated"), 0);
  f.b->deallocate(g);
}

// Threads that end leave their counts behind (host_statistics.hpp): the main thread allocates a
// block, 50 threads one after the other allocate 3 blocks each and end, the main thread allocates
// another and then frees them all. The peaks see every thread's blocks.
TEST(bridge_host, threads_that_end_keep_their_counts_and_the_peak_is_exact) {
  fixture f;
  std::vector<void*> blocks{f.b->allocate_host(1000, -1)};
  for (int t = 0; t < 50; ++t)
    std::thread([&] {
      for (int i = 0; i < 3; ++i) blocks.push_back(f.b->allocate_host(1000, -1));
    }).join();
  blocks.push_back(f.b->allocate_host(1000, -1));
  auto s = f.b->memory_stats(bridge::host);
  EXPECT_EQ(s.at("allocation.all.current"), 152);
  EXPECT_EQ(s.at("allocated_bytes.all.current"), 152 * 1024);
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), 152 * 1024);
  EXPECT_EQ(s.at("allocated_bytes.small_pool.peak"), 152 * 1024);
  EXPECT_EQ(s.at("requested_bytes.all.peak"), 152 * 1000);
  for (void* p : blocks) f.b->deallocate_host(p);
  s = f.b->memory_stats(bridge::host);
  EXPECT_EQ(s.at("allocation.all.current"), 0);
  EXPECT_EQ(s.at("allocation.all.freed"), 152);
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), 152 * 1024);
  EXPECT_EQ(s.at("allocated_bytes.large_pool.peak"), 0);
}

// A thread's latest block of at most 64 MiB stays in its own record (Note [Host statistics]): a
// worker allocates and frees 16 MiB blocks, then holds one while the main thread allocates 1 KiB.
// The main thread's peak check does not see the worker's block, so the peak is the worker's own
// 16 MiB: below the true 16 MiB + 2 KiB by less than the documented slack (4 MiB and one block).
TEST(bridge_host, a_thread_s_latest_block_stays_unpushed_within_the_peak_s_slack) {
  fixture f;
  constexpr std::int64_t big = std::int64_t{16} << 20;
  void* first = f.b->allocate_host(1024, -1);
  std::atomic<int> step{0};  // 1: the worker holds its block; 2: the main thread allocated
  std::thread worker([&] {
    for (int i = 0; i < 100; ++i) f.b->deallocate_host(f.b->allocate_host(big, -1));
    void* held = f.b->allocate_host(big, -1);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();  // alive: its record is not pushed
    f.b->deallocate_host(held);
  });
  while (step.load() != 1) std::this_thread::yield();
  void* second = f.b->allocate_host(1024, -1);
  step.store(2);
  worker.join();
  f.b->deallocate_host(first);
  f.b->deallocate_host(second);
  const auto s = f.b->memory_stats(bridge::host);
  const std::int64_t truth = big + 2048;
  EXPECT_EQ(s.at("allocated_bytes.all.current"), 0);
  EXPECT_EQ(s.at("allocation.all.allocated"), 103);
  EXPECT_LE(s.at("allocated_bytes.all.peak"), truth);
  EXPECT_GE(s.at("allocated_bytes.all.peak"), truth - (std::int64_t{4} << 20) - big);
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), big) << "the worker's block was pushed";
  EXPECT_EQ(s.at("allocated_bytes.large_pool.peak"), big);
}

// What another thread pushed counts in the next allocation's peak check (Note [Host statistics]:
// a push moves the epoch, so no thread keeps a room measured before it): the main thread
// allocates and frees 1 KiB (measuring its room), a live worker then holds two 5 MiB blocks, the
// second of which pushes its record, and the main thread's next 1 KiB makes the peak the exact
// total.
TEST(bridge_host, a_push_by_another_thread_counts_in_the_next_peak) {
  fixture f;
  f.b->deallocate_host(f.b->allocate_host(1024, -1));
  constexpr std::size_t block = std::size_t{5} << 20;
  std::atomic<int> step{0};  // 1: the worker holds its blocks; 2: the main thread allocated
  std::thread worker([&] {
    void* a = f.b->allocate_host(block, -1);
    void* b = f.b->allocate_host(block, -1);
    step.store(1);
    while (step.load() != 2) std::this_thread::yield();  // alive: no push at its end yet
    f.b->deallocate_host(a);
    f.b->deallocate_host(b);
  });
  while (step.load() != 1) std::this_thread::yield();
  f.b->deallocate_host(f.b->allocate_host(1024, -1));
  step.store(2);
  worker.join();
  // Read with nothing live: a read reports at least the current values as peaks.
  const auto s = f.b->memory_stats(bridge::host);
  EXPECT_EQ(s.at("allocated_bytes.all.current"), 0);
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), 2 * std::int64_t{block} + 1024);
  EXPECT_EQ(s.at("allocation.all.peak"), 3);
  EXPECT_EQ(s.at("allocated_bytes.small_pool.peak"), 1024);
}

// After a reset the peaks start from the current values, and the next allocation raises them
// again (Note [Host statistics]: a reset moves the epoch, so no room measured against the old,
// higher peaks stays).
TEST(bridge_host, the_first_allocation_after_a_reset_raises_the_peak) {
  fixture f;
  f.b->deallocate_host(f.b->allocate_host(std::size_t{1} << 20, -1));
  f.b->reset_peak_stats(bridge::host);
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocated_bytes.all.peak"), 0);
  f.b->deallocate_host(f.b->allocate_host(1000, -1));
  const auto s = f.b->memory_stats(bridge::host);  // nothing live: the peaks as kept
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), 1024);
  EXPECT_EQ(s.at("allocated_bytes.small_pool.peak"), 1024);
  EXPECT_EQ(s.at("requested_bytes.all.peak"), 1000);
}

TEST(bridge_host, either_free_takes_either_block_and_a_stranger_is_not_found) {
  fixture f;
  void* h = f.b->allocate_host(100, -1);
  void* g = f.b->allocate(100, 0, stream0());
  EXPECT_TRUE(f.b->owns(h));
  EXPECT_TRUE(f.b->owns(g));
  int stranger = 0;
  EXPECT_FALSE(f.b->owns(&stranger));
  for (auto free : {&bridge::deallocate, &bridge::deallocate_host}) {
    try {
      (f.b.get()->*free)(&stranger);
      ADD_FAILURE() << "a free of memory the bridge did not allocate returned";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), errc::not_found);
    }
  }
  EXPECT_EQ(f.b->memory_stats(bridge::all_devices).at("allocation.all.current"), 2);
  f.b->deallocate(h);
  f.b->deallocate_host(g);
  EXPECT_FALSE(f.b->owns(h));
  EXPECT_FALSE(f.b->owns(g));
  EXPECT_EQ(f.b->memory_stats(bridge::all_devices).at("allocation.all.current"), 0);
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocation.all.freed"), 1);
}

TEST(bridge_host, a_block_a_stream_uses_waits_for_the_stream_before_reuse) {
  fixture f;
  void* h = f.b->allocate_host(4096, -1);
  f.b->deallocate_host(h);
  void* again = f.b->allocate_host(4096, -1);
  ASSERT_EQ(again, h) << "a free block is handed out again at once (the case the test relies on)";
  ASSERT_TRUE(f.b->record_host_use(h, stream0(), 0));
  ASSERT_TRUE(f.b->record_host_use(h, stream0(), 0));  // the same stream again: one use
  f.b->deallocate_host(h);
  EXPECT_FALSE(f.b->owns(h));
  EXPECT_EQ(f.b->memory_stats(bridge::host).at("allocation.all.current"), 0);
  // The stream's event completes on its third query; until then no CPU tensor and no GPU tensor
  // gets the block.
  void* cpu = f.b->allocate_host(4096, -1);
  void* gpu = f.b->allocate(4096, 0, stream0());
  EXPECT_NE(cpu, h);
  EXPECT_NE(gpu, h);
  const auto held = [&] { return f.b->memory_stats(0).at("umem.held_for_streams_bytes"); };
  EXPECT_GE(held(), 4096) << "the block waits for GPU 0's stream";
  f.b->deallocate_host(cpu);
  f.b->deallocate(gpu);
  f.b->empty_cache(true);  // every device synchronized: the held block goes back to its pool
  EXPECT_EQ(held(), 0);
}

// Counts the queries made while a graph capture is underway, when they are illegal (Note [Frees
// during graph capture] in stream_ordered_cache.hpp); completes on the third query otherwise.
struct capture_watch {
  bool capturing = false;
  int queries_during_capture = 0;
};
class watched_event final : public machine::stream_event {
 public:
  explicit watched_event(capture_watch& w) : w_(w) {}
  void record(void*) override { queries_ = 0; }
  bool query() override {
    if (w_.capturing) ++w_.queries_during_capture;
    return ++queries_ >= 3;
  }
  void synchronize() override { queries_ = 3; }

 private:
  capture_watch& w_;
  int queries_ = 3;
};

TEST(bridge_host, a_free_during_a_capture_queries_no_event) {
  capture_watch w;
  fixture f(0, [&w](int) { return std::make_unique<watched_event>(w); });
  void* before = f.b->allocate_host(4096, -1);
  ASSERT_TRUE(f.b->record_host_use(before, stream0(), 0));
  f.b->deallocate_host(before);  // held: its event has not completed
  f.b->capture_begin();
  w.capturing = true;
  void* during = f.b->allocate_host(4096, -1);
  ASSERT_TRUE(f.b->record_host_use(during, stream0(), 0));
  f.b->deallocate_host(during);
  w.capturing = false;
  f.b->capture_end();
  EXPECT_EQ(w.queries_during_capture, 0);
  EXPECT_GE(f.b->memory_stats(0).at("umem.held_for_streams_bytes"), 2 * 4096);
  f.b->empty_cache(true);
}

TEST(bridge_host, only_live_host_blocks_and_one_gpu_are_recorded) {
  fixture f;
  int stranger = 0;
  EXPECT_FALSE(f.b->record_host_use(&stranger, stream0(), 0));
  void* g = f.b->allocate(100, 0, stream0());
  EXPECT_FALSE(f.b->record_host_use(g, stream0(), 0)) << "a GPU block has its own streams";
  void* h = f.b->allocate_host(100, -1);
  EXPECT_TRUE(f.b->record_host_use(h, stream0(), 0));
  EXPECT_FALSE(f.b->record_host_use(h, stream0(), 1)) << "a second GPU's stream";
  f.b->deallocate_host(h);
  EXPECT_FALSE(f.b->record_host_use(h, stream0(), 0)) << "a freed block";
  f.b->deallocate(g);
  f.b->empty_cache(true);
}

}  // namespace
