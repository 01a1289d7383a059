#include "os_fault_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>

#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/numa/hwloc_source.hpp"
#include "umem_mappings.hpp"

namespace umem::test {
namespace {

const topology& machine() {
  static const topology topo = [] {
    topology t;
    t.numa = numa::load_hwloc_live();
    return t;
  }();
  return topo;
}

}  // namespace

std::unique_ptr<alloc::allocator> make_os_fault_allocator(const std::string& conf) {
  const alloc::alloc_options options = alloc::parse_alloc_conf(conf);
  return std::make_unique<alloc::allocator>(
      options, machine(),
      std::make_unique<alloc::host_numa_source>(
          alloc::host_source_config{options.huge_pages, options.populate}),
      std::make_unique<alloc::no_gpu_mapper>("OS fault injection: host memory only"));
}

void expect_accounted(const alloc::allocator& a, const std::string& where, accounting how) {
  std::int64_t segment_bytes = 0, segments = 0;
  for (const alloc::pool_report& p : a.pool_reports(true))
    for (const alloc::segment_snapshot& s : p.snapshot.segments) {
      segment_bytes += static_cast<std::int64_t>(s.size);
      ++segments;
    }
  const auto stats = a.memory_stats();
  const std::int64_t reserved = stats.at("reserved_bytes.all.current");
  EXPECT_EQ(stats.at("segment.all.current"), segments) << where;
  if (how.pages_given_back) {
    EXPECT_LE(reserved, segment_bytes) << where << ": given-back pages stay inside segments";
  } else {
    EXPECT_EQ(reserved, segment_bytes) << where;
  }
  if (how.reserved_is_resident) {
    EXPECT_EQ(reserved, static_cast<std::int64_t>(umem_resident_bytes()))
        << where << ": reserved bytes are the resident pages (mincore) of umem's mappings";
  }
  const auto mapped = static_cast<std::int64_t>(umem_mapped_bytes(true));
  if (how.rollbacks_may_fail)
    EXPECT_GE(mapped, segment_bytes) << where << ": every segment is mapped read-write";
  else
    EXPECT_EQ(mapped, segment_bytes)
        << where << ": read-write memory mapped by umem (/proc/self/maps) is its segments";
}

}  // namespace umem::test
