#include "os_call_faults.hpp"

#include <numaif.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "process_maps.hpp"

namespace umem::test::os_faults {
namespace {

enum kind : std::size_t { k_mmap, k_munmap, k_mbind, k_hugepage, k_nohugepage, k_dontneed,
                          k_populate_write, k_other_advice, kinds };
constexpr std::array<const char*, kinds> kind_names = {
    "mmap", "munmap", "mbind", "madvise(MADV_HUGEPAGE)", "madvise(MADV_NOHUGEPAGE)",
    "madvise(MADV_DONTNEED)", "madvise(MADV_POPULATE_WRITE)", "madvise(other)"};

// The plan, read by every wrapped call on any thread; written by arm() only.
std::atomic<std::size_t> fail_at_{0};
std::atomic<bool> persistent_{false};
std::atomic<std::size_t> every_{0};
std::atomic<std::uint32_t> per_mille_{0};
std::atomic<std::uint64_t> seed_{0};
std::atomic<std::size_t> burst_{0};
std::atomic<std::size_t> period_{0};
std::atomic<std::size_t> only_{kinds};  // kinds: every kind counts
std::atomic<bool> armed_{false};
std::atomic<std::size_t> calls_{0};
std::atomic<std::size_t> injected_{0};
std::atomic<std::size_t> skipped_{0};
std::atomic<const char*> first_failed_{nullptr};
std::array<std::atomic<std::size_t>, kinds> by_kind_{};
std::array<std::atomic<std::size_t>, kinds> injected_by_kind_{};

// Fixed room: recording a range inside mmap must not allocate (that could call mmap).
constexpr std::size_t max_ranges = std::size_t{1} << 16;
std::mutex ranges_mutex;
std::array<range, max_ranges> ranges_;
std::size_t range_count_ = 0;

// Records a range umem holds. Caller holds ranges_mutex.
void add_range(std::uintptr_t lo, std::uintptr_t hi) {
  if (range_count_ == max_ranges) {
    std::fputs("os_call_faults: more than max_ranges mappings in one run\n", stderr);
    std::abort();
  }
  ranges_[range_count_++] = {lo, hi};
}

// Drops [lo, hi) from the recorded ranges once umem unmapped it: the address space is no longer
// umem's, and glibc may map a thread's malloc arena there later (its mmap is not wrapped), which
// must not count as umem's. Caller holds ranges_mutex.
void forget_range(std::uintptr_t lo, std::uintptr_t hi) {
  for (std::size_t i = 0; i < range_count_;) {
    range& r = ranges_[i];
    if (r.hi <= lo || hi <= r.lo) {
      ++i;
    } else if (lo <= r.lo && r.hi <= hi) {
      r = ranges_[--range_count_];  // wholly unmapped; look at the moved-in one next
    } else if (r.lo < lo && hi < r.hi) {
      const std::uintptr_t tail = r.hi;
      r.hi = lo;
      add_range(hi, tail);
      ++i;
    } else {
      if (r.lo < lo) r.hi = lo; else r.lo = hi;
      ++i;
    }
  }
}

kind advice_kind(int advice) {
  switch (advice) {
    case MADV_HUGEPAGE: return k_hugepage;
    case MADV_NOHUGEPAGE: return k_nohugepage;
    case MADV_DONTNEED: return k_dontneed;
    case MADV_POPULATE_WRITE: return k_populate_write;
    default: return k_other_advice;
  }
}

// splitmix64's finalizer: a well-mixed 64-bit value of n, so the random subset is a pure
// function of (seed, n) that any thread computes alike.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Whether the nth counted call (1-based) fails under the armed plan.
bool fails(std::size_t n) {
  const std::size_t at = fail_at_.load(std::memory_order_relaxed);
  if (at != 0 && (n == at || (persistent_.load(std::memory_order_relaxed) && n > at))) return true;
  if (const std::size_t e = every_.load(std::memory_order_relaxed); e != 0 && n % e == 0)
    return true;
  if (const std::uint32_t pm = per_mille_.load(std::memory_order_relaxed);
      pm != 0 && mix(seed_.load(std::memory_order_relaxed) ^ n) % 1000 < pm)
    return true;
  const std::size_t period = period_.load(std::memory_order_relaxed);
  return period != 0 && (n - 1) % period >= period - burst_.load(std::memory_order_relaxed);
}

// Counts a call of kind `k`; true when it is to fail.
bool should_fail(kind k) {
  by_kind_[k].fetch_add(1, std::memory_order_relaxed);
  // Acquire: a call that sees the plan armed sees all of it (arm() stores armed_ last).
  const bool armed = armed_.load(std::memory_order_acquire);
  const std::size_t only = only_.load(std::memory_order_relaxed);
  if (only != kinds && only != k) return false;
  const std::size_t n = calls_.fetch_add(1, std::memory_order_relaxed) + 1;
  return armed && fails(n);
}

// The failure of a call of kind `k`: ENOMEM, as the kernel gives it for each of these calls.
void fail(kind k) {
  injected_.fetch_add(1, std::memory_order_relaxed);
  injected_by_kind_[k].fetch_add(1, std::memory_order_relaxed);
  const char* expected = nullptr;
  first_failed_.compare_exchange_strong(expected, kind_names[k]);
  errno = ENOMEM;
}

std::vector<std::pair<std::string, std::size_t>> per_kind(
    const std::array<std::atomic<std::size_t>, kinds>& counts) {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (std::size_t k = 0; k < kinds; ++k) out.emplace_back(kind_names[k], counts[k].load());
  return out;
}

}  // namespace

void arm(const plan& p) {
  std::size_t only = kinds;
  if (!p.only.empty()) {
    only = 0;
    while (only < kinds && p.only != kind_names[only]) ++only;
    if (only == kinds) throw std::invalid_argument("os_call_faults: no call kind " + p.only);
  }
  if (p.burst > p.period)
    throw std::invalid_argument("os_call_faults: a burst longer than its period");
  armed_.store(false, std::memory_order_relaxed);
  calls_ = 0;
  injected_ = 0;
  skipped_ = 0;
  first_failed_ = nullptr;
  for (auto& c : by_kind_) c = 0;
  for (auto& c : injected_by_kind_) c = 0;
  {
    const std::lock_guard<std::mutex> lock(ranges_mutex);
    range_count_ = 0;
  }
  fail_at_.store(p.fail_at, std::memory_order_relaxed);
  persistent_.store(p.persistent, std::memory_order_relaxed);
  every_.store(p.every, std::memory_order_relaxed);
  per_mille_.store(p.per_mille, std::memory_order_relaxed);
  seed_.store(p.seed, std::memory_order_relaxed);
  burst_.store(p.burst, std::memory_order_relaxed);
  period_.store(p.period, std::memory_order_relaxed);
  only_.store(only, std::memory_order_relaxed);
  armed_.store(true, std::memory_order_release);
}

plan failing(std::size_t fail_at, bool persistent, std::string only) {
  plan p;
  p.fail_at = fail_at;
  p.persistent = persistent;
  p.only = std::move(only);
  return p;
}

void disarm() { armed_.store(false, std::memory_order_release); }

std::size_t calls() { return calls_.load(); }
std::size_t injected() { return injected_.load(); }
std::size_t skipped() { return skipped_.load(); }

std::string first_failed() {
  const char* f = first_failed_.load();
  return f ? f : "";
}

std::vector<std::pair<std::string, std::size_t>> calls_by_kind() { return per_kind(by_kind_); }
std::vector<std::pair<std::string, std::size_t>> injected_by_kind() {
  return per_kind(injected_by_kind_);
}

std::vector<range> mapped_ranges() {
  const std::lock_guard<std::mutex> lock(ranges_mutex);
  return {ranges_.begin(), ranges_.begin() + static_cast<std::ptrdiff_t>(range_count_)};
}

}  // namespace umem::test::os_faults

namespace faults = umem::test::os_faults;

// The link-time interposers (-Wl,--wrap=...): __real_X is the real X (libc's, libnuma's, or a
// sanitizer's interceptor of it).
extern "C" {
void* __real_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_munmap(void* addr, size_t len);
long __real_mbind(void* addr, unsigned long len, int mode, const unsigned long* nodemask,
                  unsigned long maxnode, unsigned flags);
int __real_madvise(void* addr, size_t len, int advice);

void* __wrap_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (faults::should_fail(faults::k_mmap)) {
    faults::fail(faults::k_mmap);
    return MAP_FAILED;
  }
  void* p = __real_mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED && !(flags & MAP_FIXED)) {
    const std::lock_guard<std::mutex> lock(faults::ranges_mutex);
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    faults::add_range(lo, lo + len);
  }
  return p;
}

int __wrap_munmap(void* addr, size_t len) {
  if (faults::should_fail(faults::k_munmap)) {
    const auto lo = reinterpret_cast<std::uintptr_t>(addr);
    if (umem::test::unmap_splits(umem::test::read_process_maps(), lo, lo + len)) {
      faults::fail(faults::k_munmap);
      return -1;
    }
    faults::skipped_.fetch_add(1);
  }
  const int rc = __real_munmap(addr, len);
  if (rc == 0) {
    const auto lo = reinterpret_cast<std::uintptr_t>(addr);
    const std::lock_guard<std::mutex> lock(faults::ranges_mutex);
    faults::forget_range(lo, lo + len);
  }
  return rc;
}

long __wrap_mbind(void* addr, unsigned long len, int mode, const unsigned long* nodemask,
                  unsigned long maxnode, unsigned flags) {
  if (faults::should_fail(faults::k_mbind)) {
    faults::fail(faults::k_mbind);
    return -1;
  }
  return __real_mbind(addr, len, mode, nodemask, maxnode, flags);
}

int __wrap_madvise(void* addr, size_t len, int advice) {
  const faults::kind k = faults::advice_kind(advice);
  if (faults::should_fail(k)) {
    faults::fail(k);
    return -1;
  }
  return __real_madvise(addr, len, advice);
}
}
