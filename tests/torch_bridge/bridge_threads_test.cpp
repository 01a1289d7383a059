// The torch bridge under threads (run under TSan in CI): PyTorch calls malloc, free and
// record_stream from any thread (autograd's among them), and statistics and empty_cache from
// others. Every block carries its holder's pattern while it is live, so a block handed to two
// holders at once, or reused before its streams' events completed, is caught by the pattern or
// by the event that says it is not complete yet.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "torch_bridge/bridge_fixture.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace {

using namespace umem;
using umem::torch_bridge::test::fixture;

void* stream_of(int i) { return reinterpret_cast<void*>(std::uintptr_t{0x1000} * (i + 1)); }

TEST(bridge_threads, allocations_frees_and_record_stream_from_many_threads_keep_blocks_apart) {
  fixture f;
  constexpr int threads = 4;
  constexpr int rounds = 3000;
  std::atomic<int> corrupted{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      std::uniform_int_distribution<std::size_t> size(1, 3 << 20);
      struct held {
        unsigned char* p;
        std::size_t n;
        unsigned char mark;
      };
      std::vector<held> live;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t n = size(rng);
        auto* p = static_cast<unsigned char*>(f.b->allocate(n, 0, stream_of(t)));
        const auto mark = static_cast<unsigned char>(t * 64 + i % 64);
        std::memset(p, mark, std::min<std::size_t>(n, 4096));
        if (i % 7 == 0) f.b->record_stream(p, stream_of((t + 1) % threads));
        live.push_back({p, n, mark});
        if (live.size() > 8 || i % 3 == 0) {
          const held h = live[rng() % live.size()];
          for (std::size_t k = 0; k < std::min<std::size_t>(h.n, 4096); k += 512)
            if (h.p[k] != h.mark) corrupted.fetch_add(1);
          f.b->deallocate(h.p);
          live.erase(std::find_if(live.begin(), live.end(),
                                  [&](const held& x) { return x.p == h.p; }));
        }
      }
      for (const held& h : live) f.b->deallocate(h.p);
    });
  std::thread observer([&] {
    while (!done.load()) {
      (void)f.b->stats(0);
      (void)f.b->empty_cache(false);
    }
  });
  for (auto& w : workers) w.join();
  done.store(true);
  observer.join();

  EXPECT_EQ(corrupted.load(), 0);
  const torch_bridge::device_stats s = f.b->stats(0);
  EXPECT_EQ(s.allocated_bytes[0].current, 0);
  EXPECT_EQ(s.allocation[0].current, 0);
  EXPECT_EQ(s.allocation[0].allocated, threads * rounds);
  f.b->empty_cache(true);
  EXPECT_EQ(f.b->stats(0).active_bytes[0].current, 0);
}

}  // namespace
