// The alloc+free benchmarks, one loop for every contender (contenders.hpp).
//
// Note [What one operation is]
// One operation = allocate, write the first cache line (64 bytes, or the whole block if smaller),
// free. The write is there for fairness: mmap-based allocators (numa_alloc_onnode, hwloc,
// mmap+mbind, glibc above its mmap threshold) return memory that is not backed yet, and without
// a write they would be timed without the page fault every real use pays. Writing only the first
// line keeps the cost of touching the whole block (which is the same for every allocator once
// the memory is backed) out of the comparison. Every contender gets exactly the same write.
//
// Note [Warm state]
// Before every run (Google Benchmark's Setup, while no benchmark thread runs) umem's caches are
// returned to the OS, so no run inherits what another cached. Each thread then warms up untimed
// in passes (one operation for a single size, the whole sequence for a mix) until, in every
// thread of the run at once, the last fault_free_passes passes caused no page fault in that
// thread, or one faulted on at least half of its operations (an allocator that does not keep
// memory backed, which no warming changes), or max_warm_passes. So caching allocators are
// measured on their cached path with their memory backed ("on reuse", what the targets are
// about), not while their cache grows.
// With 2 threads umem's pool hands out blocks at new addresses of its cached segments for 25-50
// passes of the large mix (with or without thread caches), with fault-free passes in between,
// and with huge pages each first write into a fresh 2 MiB region is a huge-page fault that costs
// more than hundreds of operations (docs/log/2026-12-05-comment-numbers.md): ending at the first
// fault-free pass left a few faults in the timed loop, and they made its time; so did a thread
// that ended its own warm-up while the other thread's passes still moved the pool's blocks to
// new addresses, hence the joint end. The passes taken are reported as the counter warm_passes,
// the faults left as faults_per_op.
//
// Note [Threads]
// Runs are registered with 1 and 2 threads (this machine has 2 cores). Each thread allocates
// and frees its own blocks on the same allocator, so umem's threads share one pool (its
// contention). Google Benchmark reports wall time / total operations of all threads; the report
// multiplies by the thread count to show the time one operation takes as seen by a thread.
#pragma once

#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "bench_method.hpp"
#include "contenders.hpp"
#include "size_mix.hpp"

namespace umem::bench {

inline constexpr std::size_t cache_line = 64;

// The threads of one run warm up together (Note [Warm state]): `ready` counts the threads whose
// last fault_free_passes passes were all fault-free (or that cannot get there); the first thread
// to see all of them ready sets `finished`, and every thread stops at its next check.
struct joint_warm_up_state {
  std::atomic<int> ready{0};
  std::atomic<bool> finished{false};
};
inline joint_warm_up_state joint_warm_up;

// Called from the Setup of every run, before its threads start.
inline void reset_joint_warm_up() {
  joint_warm_up.ready.store(0);
  joint_warm_up.finished.store(false);
}

// Minor page faults of the calling thread so far.
inline long thread_minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Runs `pass` (`ops` operations; returns false on a failed allocation) as Note [Warm state]
// says, jointly with the run's other threads. Returns the passes run, or -1 after a failure.
template <class Pass>
int warm_up(const benchmark::State& state, std::size_t ops, Pass pass) {
  int clean = 0;
  bool counted = false;  // this thread is in joint_warm_up.ready
  auto count = [&](bool in) {
    if (in != counted) joint_warm_up.ready.fetch_add(in ? 1 : -1);
    counted = in;
  };
  int n = 1;
  for (; n <= max_warm_passes; ++n) {
    const long before = thread_minor_faults();
    if (!pass()) {
      count(true);  // never holds the others back
      return -1;
    }
    const auto faults = static_cast<std::size_t>(thread_minor_faults() - before);
    if (2 * faults >= ops) break;  // nothing kept backed: no warming changes it
    clean = faults == 0 ? clean + 1 : 0;
    count(clean >= fault_free_passes);
    if (joint_warm_up.ready.load() == state.threads()) joint_warm_up.finished.store(true);
    if (joint_warm_up.finished.load()) return n;
  }
  count(true);
  return std::min(n, max_warm_passes);
}

// warm_passes: averaged over the threads; faults_per_op: page faults in the timed loops of all
// threads / their operations (a warm cache that stays backed has none).
inline void record_counters(benchmark::State& state, int warm_passes, long timed_faults) {
  state.SetItemsProcessed(state.iterations());
  state.counters["warm_passes"] =
      benchmark::Counter(warm_passes, benchmark::Counter::kAvgThreads);
  state.counters["faults_per_op"] = benchmark::Counter(static_cast<double>(timed_faults),
                                                       benchmark::Counter::kAvgIterations);
}

inline void touch_first_line(void* p, std::size_t bytes, std::size_t value) {
  std::memset(p, static_cast<int>(value & 0xff), std::min(bytes, cache_line));
  benchmark::DoNotOptimize(p);
  benchmark::ClobberMemory();
}

template <contender C>
void alloc_free_single(benchmark::State& state, C c, std::size_t bytes) {
  const int warm_passes = warm_up(state, 1, [&] {
    void* p = c.allocate(bytes);
    if (p == nullptr) return false;
    touch_first_line(p, bytes, 0);
    c.deallocate(p, bytes);
    return true;
  });
  if (warm_passes < 0) {
    state.SkipWithError("allocation failed");
    return;
  }
  const long faults_before = thread_minor_faults();
  for (auto _ : state) {
    void* p = c.allocate(bytes);
    if (p == nullptr) {
      state.SkipWithError("allocation failed");
      break;
    }
    touch_first_line(p, bytes, 1);
    c.deallocate(p, bytes);
  }
  record_counters(state, warm_passes, thread_minor_faults() - faults_before);
}

template <contender C>
void alloc_free_mix(benchmark::State& state, C c, std::span<const std::size_t> sizes) {
  std::array<void*, mix_live_blocks> live{};
  std::array<std::size_t, mix_live_blocks> live_bytes{};
  // Threads start at different points of the sequence so they do not ask for the same sizes in
  // lockstep.
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 97;
  auto step = [&] {
    const std::size_t slot = i % mix_live_blocks;
    if (live[slot] != nullptr) c.deallocate(live[slot], live_bytes[slot]);
    const std::size_t bytes = sizes[i % sizes.size()];
    void* p = c.allocate(bytes);
    live[slot] = p;
    live_bytes[slot] = bytes;
    ++i;
    if (p == nullptr) return false;
    touch_first_line(p, bytes, i);
    return true;
  };
  const int warm_passes = warm_up(state, sizes.size(), [&] {
    for (std::size_t k = 0; k < sizes.size(); ++k)
      if (!step()) return false;
    return true;
  });
  bool ok = warm_passes > 0;
  const long faults_before = thread_minor_faults();
  if (ok) {
    for (auto _ : state) {
      if (!step()) {
        ok = false;
        break;
      }
    }
  }
  if (!ok) state.SkipWithError("allocation failed");
  const long timed_faults = thread_minor_faults() - faults_before;
  for (std::size_t s = 0; s < mix_live_blocks; ++s)
    if (live[s] != nullptr) c.deallocate(live[s], live_bytes[s]);
  record_counters(state, warm_passes, timed_faults);
}

// Registers "alloc_free/<name>/size:<bytes>" for every single size and "mix/<name>/<mix>" for
// every mix, each with 1 and 2 threads. `before_run` is the Setup of every run (Note [Warm
// state]).
using setup_fn = void (*)(const benchmark::State&);
template <contender C>
void register_alloc_free(const std::string& name, C c, setup_fn before_run) {
  for (std::size_t bytes : single_sizes())
    benchmark::RegisterBenchmark(("alloc_free/" + name + "/size:" + std::to_string(bytes)).c_str(),
                                 [c, bytes](benchmark::State& s) { alloc_free_single(s, c, bytes); })
        ->Setup(before_run)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime()
        ->Unit(benchmark::kNanosecond);
  for (const size_mix& mix : mixes()) {
    auto sizes = std::make_shared<const std::vector<std::size_t>>(mix_sequence(mix, mix_length));
    benchmark::RegisterBenchmark(("mix/" + name + "/" + std::string(mix.name)).c_str(),
                                 [c, sizes](benchmark::State& s) { alloc_free_mix(s, c, *sizes); })
        ->Setup(before_run)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime()
        ->Unit(benchmark::kNanosecond);
  }
}

}  // namespace umem::bench
