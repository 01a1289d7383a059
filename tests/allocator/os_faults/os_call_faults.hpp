// Failing the Nth OS memory call of umem's code in this test program. The program is linked
// with -Wl,--wrap=mmap,--wrap=munmap,--wrap=mbind,--wrap=madvise (tests/allocator/CMakeLists.txt),
// so the calls of the statically linked umem libraries (os_memory.cpp) reach the __wrap_
// functions of os_call_faults.cpp; shared libraries (libc, hwloc, the sanitizers' runtimes) keep
// the real calls. A failed call returns what the kernel would: -1 (MAP_FAILED) with ENOMEM, and
// changes nothing. munmap is failed only where it would split a mapping, since otherwise the
// kernel cannot fail it; such a call counts but is let through (see skipped()).
//
// Thread-safe: the counter is atomic; arm() and disarm() are called with no umem call in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace umem::test::os_faults {

// What the next calls do: `fail_at` 0 counts only; otherwise the fail_at-th counted call
// (1-based) fails, and when `persistent`, every call after it too (memory that stays exhausted).
void arm(std::size_t fail_at, bool persistent);
// Stops failing (counting goes on).
void disarm();

std::size_t calls();     // counted since arm()
std::size_t injected();  // calls failed since arm()
std::size_t skipped();   // munmaps chosen to fail that could not (they split no mapping)
// "mmap", "munmap", "mbind", "madvise(MADV_HUGEPAGE)", ... of the first failed call; "" if none.
std::string first_failed();
// How many calls of each kind were counted since arm(), e.g. {"mmap", 120}.
std::vector<std::pair<std::string, std::size_t>> calls_by_kind();

// Every range a successful non-fixed mmap returned since arm(): the address space umem took.
struct range {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
};
std::vector<range> mapped_ranges();

}  // namespace umem::test::os_faults
