// The allocator the OS fault tests drive, and the check of its accounting against the kernel.
// One construction for every test here: umem's real host NUMA source on this machine
// (so every mmap, munmap, mbind and madvise goes through os_call_faults.hpp), no GPU.
#pragma once

#include <memory>
#include <string>

#include "umem/allocator/allocator.hpp"

namespace umem::test {

// AddressSanitizer's and ThreadSanitizer's runtimes map anonymous memory as the test runs (their
// allocators, quarantine, shadow), so under them the process-wide baseline of anonymous mappings
// is no measure; what umem itself mapped (os_call_faults.hpp records every range) still is.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitizer_maps_memory = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitizer_maps_memory = true;
#else
inline constexpr bool sanitizer_maps_memory = false;
#endif
#else
inline constexpr bool sanitizer_maps_memory = false;
#endif

// An allocator configured by `conf` (UMEM_ALLOC_CONF syntax) over this machine's NUMA nodes.
std::unique_ptr<alloc::allocator> make_os_fault_allocator(const std::string& conf);

struct accounting {
  // Every OS call failed from some point on: a growth whose set-up failed cannot be rolled back
  // either (its mmap(PROT_NONE) fails too, logged by host_numa_source.cpp), so the range stays
  // read-write inside its segment's reservation until the segment is unmapped and the kernel may
  // show more than the segments. The check after the allocator is gone still proves no leak.
  bool rollbacks_may_fail = false;
  // The pool may have given pages back (MADV_DONTNEED, Note [Decommitted pages] in
  // caching_pool.hpp: trim(), max_cached): they stay mapped inside their segment but leave the
  // reserved bytes, which are then at most the segments' sizes.
  bool pages_given_back = false;
  // ...and exactly the resident pages of umem's mappings (mincore): true where segments are
  // populated and every page of every block is written (os_fault_replay.hpp, workload::touch).
  bool reserved_is_resident = false;
};

// Statistics against a recount of the segments, and the segments against the kernel
// (gtest expectations, `where` in their messages).
void expect_accounted(const alloc::allocator& a, const std::string& where, accounting how);

}  // namespace umem::test
