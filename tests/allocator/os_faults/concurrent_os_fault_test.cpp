// OS calls failing while several threads allocate and free through one allocator (thread caches
// on, as by default): every Kth call, a seeded random subset, or bursts (os_call_faults.hpp, whose
// decisions are a function of the call's number, so any thread may make any call). Every failure
// a thread sees must be umem::error(out_of_memory), nothing else; every block a thread got keeps
// what it wrote until its free; a run that hangs aborts. After the threads are gone and
// everything is freed and trimmed the statistics are zero, as the segments and the kernel's
// read-write mappings of umem's ranges (/proc/self/maps) are; the allocator then serves threads
// again once the calls succeed. The process-wide baseline of single-threaded replays
// (os_fault_replay.cpp) is not checked here: glibc keeps the stacks and malloc arenas of threads
// that exited, so the process's anonymous mappings change with threads whatever umem does.
//
// ThreadSanitizer works with this program (cmake --preset tsan, target umem_os_fault_tests,
// ctest -L os_faults): the __real_ calls of os_call_faults.cpp reach TSan's own interceptors of
// mmap, munmap and madvise, so it still sees every mapping, and it reports no race here.
// scripts/test.sh's TSan stage builds only the allocator and bridge suites, so CI runs this
// program in its release and ASan stages only.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <latch>
#include <ostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "os_call_faults.hpp"
#include "os_fault_allocator.hpp"
#include "umem/core/error.hpp"
#include "umem_mappings.hpp"

namespace umem::test {
namespace {

constexpr unsigned threads = 4;  // more than this machine's 2 cores: threads preempted mid-call
constexpr std::size_t ops_per_thread = 10000;
constexpr std::size_t most_held = 24;  // blocks a thread holds at once
// Far above a run's seconds, also under the sanitizers; past it the run is taken as hung.
constexpr auto deadline = std::chrono::seconds(240);

struct fault_pattern {
  std::string name;
  os_faults::plan plan;
  std::string conf;
};

// gtest prints the parameter by this (the test's name says the same).
void PrintTo(const fault_pattern& f, std::ostream* os) { *os << f.name; }

// Which calls fail (os_faults::plan): every `every`th, about per_mille / 1000 chosen by `seed`,
// and the last `burst` of every `period`.
fault_pattern pattern(std::string name, std::size_t every, std::uint32_t per_mille,
                      std::uint64_t seed, std::size_t burst, std::size_t period,
                      std::string conf = {}) {
  fault_pattern f{std::move(name), {}, std::move(conf)};
  f.plan.every = every;
  f.plan.per_mille = per_mille;
  f.plan.seed = seed;
  f.plan.burst = burst;
  f.plan.period = period;
  return f;
}

// Not every 3rd call: that fails each new segment at the same step (mmap, trim head, trim tail),
// so nothing is ever allocated.
const std::vector<fault_pattern> patterns = {
    pattern("every_7th_call", 7, 0, 0, 0, 0),
    pattern("random_20_percent", 0, 200, 20261201, 0, 0),
    pattern("bursts_of_16_in_64", 0, 0, 0, 16, 64),
    pattern("random_10_percent_max_cached", 0, 100, 7, 0, 0, "max_cached:16MiB"),
    pattern("random_40_percent", 0, 400, 3, 0, 0),
};

// A block a thread holds, with the word it wrote at its start, middle and end.
struct held {
  void* p = nullptr;
  std::size_t bytes = 0;
  std::uint64_t tag = 0;
};

std::size_t word_at(std::size_t bytes, int which) {
  constexpr std::size_t w = sizeof(std::uint64_t);
  return which == 0 ? 0 : which == 1 ? bytes / 2 / w * w : bytes - w;
}

void write_marks(const held& h) {
  for (int i = 0; i < 3; ++i)
    std::memcpy(static_cast<unsigned char*>(h.p) + word_at(h.bytes, i), &h.tag, sizeof h.tag);
}

bool marks_intact(const held& h) {
  for (int i = 0; i < 3; ++i)
    if (std::memcmp(static_cast<const unsigned char*>(h.p) + word_at(h.bytes, i), &h.tag,
                    sizeof h.tag) != 0)
      return false;
  return true;
}

// A mix like a training step's: mostly small blocks, some large ones, a few huge ones (those
// cost address space only: just three words of each are written).
std::size_t size_of(std::mt19937_64& rng) {
  const std::uint64_t r = rng() % 100;
  if (r < 60) return 256 + rng() % (64 << 10);
  if (r < 85) return (64 << 10) + rng() % (960 << 10);
  if (r < 98) return (std::size_t{1} << 20) + rng() % (std::size_t{23} << 20);
  return (std::size_t{64} << 20) + rng() % (std::size_t{96} << 20);
}

struct worker_result {
  std::size_t allocs = 0, out_of_memory = 0, frees = 0, trims = 0;
  std::vector<std::string> problems;  // anything but out_of_memory, and damaged blocks
  std::vector<held> left;             // freed by the main thread (frees from another thread)
};

// Runs `what`, recording every exception other than umem::error(out_of_memory) as a problem;
// true when it returned.
template <class F>
bool guarded(worker_result& r, const char* call, F&& what) {
  try {
    what();
    return true;
  } catch (const umem::error& e) {
    if (e.code() == errc::out_of_memory) {
      ++r.out_of_memory;
    } else {
      r.problems.push_back(std::string(call) + ": umem::error " + to_string(e.code()) + ": " +
                           e.what());
    }
  } catch (const std::exception& e) {
    r.problems.push_back(std::string(call) + ": not a umem::error: " + e.what());
  } catch (...) {
    r.problems.push_back(std::string(call) + ": an exception of unknown type");
  }
  return false;
}

void free_checked(alloc::allocator& a, const held& h, worker_result& r) {
  if (!marks_intact(h))
    r.problems.push_back("a block of " + std::to_string(h.bytes) + " bytes changed before its free");
  if (guarded(r, "deallocate", [&] { a.deallocate(h.p); })) ++r.frees;
}

void work(alloc::allocator& a, unsigned t, std::uint64_t seed, worker_result& r) {
  std::mt19937_64 rng(seed * 1000 + t);
  std::vector<held> mine;
  for (std::size_t i = 0; i < ops_per_thread; ++i) {
    if (!mine.empty() && (mine.size() >= most_held || rng() % 100 < 40)) {
      const std::size_t k = rng() % mine.size();
      free_checked(a, mine[k], r);
      mine[k] = mine.back();
      mine.pop_back();
    } else if (rng() % 256 == 0) {
      if (guarded(r, "trim", [&] { a.trim(); })) ++r.trims;  // another thread's empty_cache()
    } else {
      held h{nullptr, size_of(rng), (std::uint64_t{t} << 56) | (i << 8) | 0x5a};
      if (guarded(r, "allocate", [&] { h.p = a.allocate(h.bytes); })) {
        ++r.allocs;
        write_marks(h);
        mine.push_back(h);
      }
    }
  }
  // Half stays for the main thread to free.
  for (std::size_t k = 0; k < mine.size(); ++k) {
    if (k % 2 == 0) {
      free_checked(a, mine[k], r);
    } else {
      r.left.push_back(mine[k]);
    }
  }
}

// Runs `body(t)` on `threads` threads, started together (a thread created late would otherwise
// run its few milliseconds of work alone); aborts the process if they are not done by the deadline
// (a hang cannot be failed and carried on from: the threads would still hold the allocator).
template <class F>
void run_threads(const std::string& where, F&& body) {
  std::mutex m;
  std::condition_variable cv;
  unsigned done = 0;
  std::latch start(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      body(t);
      const std::lock_guard lock(m);
      ++done;
      cv.notify_all();
    });
  {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, deadline, [&] { return done == threads; })) {
      std::fprintf(stderr, "%s: %u of %u threads still running after %lld s: hung\n",
                   where.c_str(), threads - done, threads,
                   static_cast<long long>(deadline.count()));
      std::abort();
    }
  }
  for (auto& th : pool) th.join();
}

void expect_empty(const alloc::allocator& a, const std::string& where) {
  const auto stats = a.memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), 0) << where;
  EXPECT_EQ(stats.at("reserved_bytes.all.current"), 0) << where;
  EXPECT_EQ(stats.at("segment.all.current"), 0) << where;
  expect_accounted(a, where, {});
  EXPECT_EQ(umem_mapped_bytes(true), 0u) << where << ": nothing of umem's is read-write";
}

class concurrent_os_faults : public ::testing::TestWithParam<fault_pattern> {};

TEST_P(concurrent_os_faults, threads_see_only_out_of_memory_and_nothing_leaks) {
  const fault_pattern& f = GetParam();
  const std::string where = "4 threads, " + f.name;
  const auto start = std::chrono::steady_clock::now();
  os_faults::arm(f.plan);
  {
    auto a = make_os_fault_allocator(f.conf);
    std::vector<worker_result> results(threads);
    run_threads(where, [&](unsigned t) { work(*a, t, f.plan.seed + 1, results[t]); });
    os_faults::disarm();
    const std::size_t calls = os_faults::calls(), injected = os_faults::injected();

    worker_result total;
    for (worker_result& r : results) {
      total.allocs += r.allocs;
      total.out_of_memory += r.out_of_memory;
      total.frees += r.frees;
      total.trims += r.trims;
      for (const std::string& p : r.problems) ADD_FAILURE() << where << ": " << p;
    }
    EXPECT_GT(injected, 0u) << where << ": the faults were reached";
    EXPECT_GT(total.allocs, 0u) << where << ": some allocations succeeded";
    accounting how;
    how.rollbacks_may_fail = true;  // a failed growth's rollback may fail too (every Kth call)
    how.pages_given_back = true;    // the threads' trim() calls, and max_cached
    expect_accounted(*a, where + ", blocks live", how);

    for (worker_result& r : results)
      for (const held& h : r.left) free_checked(*a, h, total);
    for (const std::string& p : total.problems) ADD_FAILURE() << where << ", main thread: " << p;
    EXPECT_NO_THROW(a->trim()) << where;
    expect_empty(*a, where + ", all freed and trimmed");

    // Serving again, from threads, now that the calls succeed.
    std::vector<worker_result> again(threads);
    run_threads(where + ", after", [&](unsigned t) {
      for (std::size_t bytes : {std::size_t{4096}, std::size_t{3} << 20, std::size_t{70} << 20}) {
        held h{nullptr, bytes, 0xa5a5u + t};
        if (!guarded(again[t], "allocate after the faults", [&] { h.p = a->allocate(bytes); }))
          continue;
        write_marks(h);
        free_checked(*a, h, again[t]);
      }
    });
    for (const worker_result& r : again) {
      EXPECT_EQ(r.out_of_memory, 0u) << where << ": out of memory once the calls succeed";
      for (const std::string& p : r.problems) ADD_FAILURE() << where << ", after: " << p;
    }
    EXPECT_NO_THROW(a->trim()) << where;
    expect_empty(*a, where + ", served again and trimmed");

    std::string kinds;
    for (const auto& [kind, n] : os_faults::injected_by_kind())
      if (n != 0) kinds += " " + kind + "=" + std::to_string(n);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "[os faults] " << where << ": " << threads * ops_per_thread << " operations, "
              << calls << " OS calls, " << injected << " failed (" << (kinds.empty() ? "" : kinds.substr(1))
              << "), " << total.out_of_memory << " out_of_memory errors seen, " << total.allocs
              << " blocks allocated, " << total.frees << " freed, " << total.trims << " trims, "
              << seconds << " s\n";
  }
  EXPECT_EQ(umem_mapped_bytes(false), 0u) << where << ": umem's mappings are gone";
}

INSTANTIATE_TEST_SUITE_P(seeded, concurrent_os_faults, ::testing::ValuesIn(patterns),
                         [](const ::testing::TestParamInfo<fault_pattern>& p) {
                           return p.param.name;
                         });

}  // namespace
}  // namespace umem::test
