// The residency report says what move_pages says, on every node and for interleaved memory.
#include <gtest/gtest.h>

#include <cerrno>

#include "placement_checks.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/residency.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

// The report against move_pages for a fully mapped range: the same pages on each node, and every
// page without a node (-ENOENT, or -EFAULT on Linux 6.1 before page tables exist: residency.hpp,
// Note [Not present]) counted as not present.
void expect_agreement(const residency_report& r, const std::map<int, std::size_t>& kernel) {
  std::map<int, std::size_t> on_nodes;
  std::size_t absent = 0;
  for (const auto& [status, pages] : kernel) {
    if (status >= 0) on_nodes[status] = pages;
    if (status == -ENOENT || status == -EFAULT) absent += pages;
  }
  EXPECT_EQ(r.pages_per_node, on_nodes);
  EXPECT_EQ(r.not_present_pages, absent);
  EXPECT_EQ(r.unmapped_pages + r.other_pages, 0u);
}

TEST_F(placement_checks, residency_report_agrees_with_move_pages_on_every_node) {
  for (int n : nodes()) {
    host_numa_source src(host_source_config{true, populate_mode::touch});
    const segment s = src.allocate(checked_bytes, {bind_mode::bind, {n}}, umem::coherence::fine);
    const residency_report r = query_residency(s.base, s.size);
    expect_agreement(r, pages_by_node(s.base, s.size));
    EXPECT_EQ(r.pages_per_node, (std::map<int, std::size_t>{{n, s.size / r.page_size}}));
    ASSERT_TRUE(r.policy.has_value());
    EXPECT_EQ(r.policy->nodes, std::vector<int>{n});
    src.deallocate(s);
  }
}

TEST_F(placement_checks, residency_report_agrees_with_move_pages_on_half_touched_interleave) {
  host_numa_source src(host_source_config{false, populate_mode::none});
  const segment s = src.allocate(checked_bytes, {bind_mode::interleave, nodes()},
                                 umem::coherence::fine);
  for (std::size_t off = 0; off < s.size / 2; off += 4096) static_cast<char*>(s.base)[off] = 1;
  const residency_report r = query_residency(s.base, s.size);
  expect_agreement(r, pages_by_node(s.base, s.size));
  EXPECT_EQ(r.not_present_pages, s.size / 2 / r.page_size);
  EXPECT_EQ(r.huge_page_bytes, 0u);
  src.deallocate(s);
}

}  // namespace
}  // namespace umem::placement_test
