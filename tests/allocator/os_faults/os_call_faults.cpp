#include "os_call_faults.hpp"

#include <numaif.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "process_maps.hpp"

namespace umem::test::os_faults {
namespace {

enum kind : std::size_t { k_mmap, k_munmap, k_mbind, k_hugepage, k_nohugepage, k_dontneed,
                          k_populate_write, k_other_advice, kinds };
constexpr std::array<const char*, kinds> kind_names = {
    "mmap", "munmap", "mbind", "madvise(MADV_HUGEPAGE)", "madvise(MADV_NOHUGEPAGE)",
    "madvise(MADV_DONTNEED)", "madvise(MADV_POPULATE_WRITE)", "madvise(other)"};

std::atomic<std::size_t> fail_at_{0};
std::atomic<bool> persistent_{false};
std::atomic<bool> armed_{false};
std::atomic<std::size_t> calls_{0};
std::atomic<std::size_t> injected_{0};
std::atomic<std::size_t> skipped_{0};
std::atomic<const char*> first_failed_{nullptr};
std::array<std::atomic<std::size_t>, kinds> by_kind_{};

// Fixed room: recording a range inside mmap must not allocate (that could call mmap).
constexpr std::size_t max_ranges = std::size_t{1} << 16;
std::mutex ranges_mutex;
std::array<range, max_ranges> ranges_;
std::size_t range_count_ = 0;

kind advice_kind(int advice) {
  switch (advice) {
    case MADV_HUGEPAGE: return k_hugepage;
    case MADV_NOHUGEPAGE: return k_nohugepage;
    case MADV_DONTNEED: return k_dontneed;
    case MADV_POPULATE_WRITE: return k_populate_write;
    default: return k_other_advice;
  }
}

// Counts a call of kind `k`; true when it is to fail.
bool should_fail(kind k) {
  by_kind_[k].fetch_add(1);
  const std::size_t n = calls_.fetch_add(1) + 1;
  const std::size_t at = fail_at_.load();
  if (!armed_.load() || at == 0) return false;
  return n == at || (persistent_.load() && n > at);
}

// The failure of a call of kind `k`: ENOMEM, as the kernel gives it for each of these calls.
void fail(kind k) {
  injected_.fetch_add(1);
  const char* expected = nullptr;
  first_failed_.compare_exchange_strong(expected, kind_names[k]);
  errno = ENOMEM;
}

}  // namespace

void arm(std::size_t fail_at, bool persistent) {
  calls_ = 0;
  injected_ = 0;
  skipped_ = 0;
  first_failed_ = nullptr;
  for (auto& c : by_kind_) c = 0;
  {
    const std::lock_guard<std::mutex> lock(ranges_mutex);
    range_count_ = 0;
  }
  fail_at_ = fail_at;
  persistent_ = persistent;
  armed_ = true;
}

void disarm() { armed_ = false; }

std::size_t calls() { return calls_.load(); }
std::size_t injected() { return injected_.load(); }
std::size_t skipped() { return skipped_.load(); }

std::string first_failed() {
  const char* f = first_failed_.load();
  return f ? f : "";
}

std::vector<std::pair<std::string, std::size_t>> calls_by_kind() {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (std::size_t k = 0; k < kinds; ++k) out.emplace_back(kind_names[k], by_kind_[k].load());
  return out;
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
    if (faults::range_count_ == faults::max_ranges) {
      std::fputs("os_call_faults: more than max_ranges mappings in one run\n", stderr);
      std::abort();
    }
    const auto lo = reinterpret_cast<std::uintptr_t>(p);
    faults::ranges_[faults::range_count_++] = {lo, lo + len};
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
  return __real_munmap(addr, len);
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
