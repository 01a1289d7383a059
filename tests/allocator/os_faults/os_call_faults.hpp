// Failing the Nth OS memory call of umem's code in this test program. The program is linked
// with -Wl,--wrap=mmap,--wrap=munmap,--wrap=mbind,--wrap=madvise (tests/allocator/CMakeLists.txt),
// so the calls of the statically linked umem libraries (os_memory.cpp) reach the __wrap_
// functions of os_call_faults.cpp; shared libraries (libc, hwloc, the sanitizers' runtimes) keep
// the real calls. A failed call returns what the kernel would: -1 (MAP_FAILED) with ENOMEM, and
// changes nothing. munmap is failed only where it would split a mapping, since otherwise the
// kernel cannot fail it; such a call counts but is let through (see skipped()).
//
// Thread-safe: every call may come from any thread. Whether the nth counted call fails is a pure
// function of n and the plan (held in atomics), and n comes from one atomic counter, so threads
// racing through the wrappers see one consistent sequence of decisions. arm() and disarm() are
// called with no umem call in flight (arm() resets the counters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace umem::test::os_faults {

// Which counted calls fail; a call fails when any of the rules says so. Calls are counted from
// 1 after arm().
struct plan {
  std::size_t fail_at = 0;      // this call fails (0: none)...
  bool persistent = false;      // ...and, when set, every later one (memory that stays exhausted)
  std::size_t every = 0;        // calls every, 2 * every, ... fail (0: none)
  std::uint32_t per_mille = 0;  // a pseudo-random subset of about per_mille / 1000 of the calls,
  std::uint64_t seed = 0;       // the same for the same seed
  std::size_t burst = 0;        // the last `burst` calls of every `period` fail (0: none)
  std::size_t period = 0;
  // When set, only calls of this kind (a name calls_by_kind() lists, e.g.
  // "madvise(MADV_DONTNEED)") are counted and may fail; the others pass uncounted.
  std::string only;
};

// Throws std::invalid_argument for an unknown `only` kind or a burst longer than its period.
void arm(const plan& p);
// The fail_at-th counted call of any kind fails (0: none), and every later one when `persistent`.
plan failing(std::size_t fail_at, bool persistent, std::string only = {});
// Stops failing (counting goes on).
void disarm();

std::size_t calls();     // counted since arm()
std::size_t injected();  // calls failed since arm()
std::size_t skipped();   // munmaps chosen to fail that could not (they split no mapping)
// "mmap", "munmap", "mbind", "madvise(MADV_HUGEPAGE)", ... of the first failed call; "" if none.
std::string first_failed();
// How many calls of each kind were made since arm() (counted or not), e.g. {"mmap", 120}.
std::vector<std::pair<std::string, std::size_t>> calls_by_kind();
// How many calls of each kind failed since arm().
std::vector<std::pair<std::string, std::size_t>> injected_by_kind();

// Every range a successful non-fixed mmap returned since arm(), less what munmap gave back: the
// address space umem holds.
struct range {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
};
std::vector<range> mapped_ranges();

}  // namespace umem::test::os_faults
