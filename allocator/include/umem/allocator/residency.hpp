// The truth about where a range of memory lives: pages per NUMA node, how much is backed by
// huge pages, the NUMA policy of its mapping, and whether the GPU can access it.
//
// Note [Huge-page granularity]
// As root, each present page's frame is looked up in /proc/self/pagemap and its KPF_THP bit in
// /proc/kpageflags: the count is exact for the range (granularity "page"). Otherwise frame
// numbers are hidden and only /proc/self/smaps is left: the AnonHugePages of every VMA that
// overlaps the range, summed whole (granularity "vma"), which over-counts when a VMA extends
// beyond the range. The report says which one it used.
//
// Note [Not present]
// move_pages(nodes=NULL) reports a mapped page that has no page of its own as -ENOENT on recent
// kernels, but as -EFAULT on older ones (Linux 6.1: an untouched anonymous range without page
// tables yet, and the shared zero page after a read), which is also its answer for an address
// outside any mapping. So -EFAULT counts as "not present" where /proc/self/smaps shows a VMA and
// as "unmapped" elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/allocator/source/os_memory.hpp"

namespace umem::alloc {

enum class huge_page_granularity { page, vma };
const char* to_string(huge_page_granularity g);

struct residency_report {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  std::size_t page_size = 0;  // base page size the counts below are in
  std::size_t total_pages = 0;
  std::map<int, std::size_t> pages_per_node;  // present pages, by NUMA node
  std::size_t not_present_pages = 0;  // mapped, but no page of its own (see Note [Not present])
  std::size_t unmapped_pages = 0;     // outside every mapping
  std::size_t other_pages = 0;        // any other move_pages status
  std::size_t huge_page_bytes = 0;
  huge_page_granularity huge_granularity = huge_page_granularity::vma;
  bool huge_pages_advised = false;  // every VMA overlapping the range has VmFlags 'hg'
  std::optional<os::memory_policy> policy;  // of the mapping at `base`; nullopt if unmapped
  std::optional<bool> gpu_accessible;  // nullopt: no gpu_mapper was given, so unknown
  std::string gpu_access;              // the mapper's describe(), or why unknown
};

// Queries [p, p+n) of this process now. `mapper` (may be null) is the mapper that made the range
// GPU-visible. The range need not be aligned: every base page it touches counts.
// move_pages runs in batches, so any size works. Throws umem::error for n == 0 or when
// move_pages fails as a whole (e.g. a kernel without NUMA support: errc::unsupported).
residency_report query_residency(const void* p, std::size_t n, const gpu_mapper* mapper = nullptr);

// The report as a JSON object (pretty-printed with `indent` >= 0, compact with -1):
// {"base","bytes","page_size","pages":{"total","per_node":{"0":..},"not_present","unmapped",
// "other"},"huge_pages":{"bytes","granularity","advised"},"policy":{"mode","nodes"} or null,
// "gpu":{"accessible","mechanism"}}.
std::string to_json(const residency_report& r, int indent = 2);

}  // namespace umem::alloc
