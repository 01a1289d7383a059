// interleave over all nodes: pages split evenly, exactly with 4 KiB pages, within one huge page
// per node with THP (a 2 MiB huge page goes to one node as a whole).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "placement_checks.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/placement_resolver.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

// Pages per node of an interleaved segment, checked against total/N within `tolerance`.
void expect_balanced(const std::map<int, std::size_t>& counts, const std::vector<int>& all,
                     std::size_t total, std::size_t tolerance) {
  std::size_t seen = 0;
  for (int n : all) {
    const std::size_t got = counts.count(n) ? counts.at(n) : 0;
    const auto diff = static_cast<long>(got) - static_cast<long>(total / all.size());
    EXPECT_LE(static_cast<std::size_t>(std::labs(diff)), tolerance)
        << "node " << n << " has " << got << " of " << total << " pages";
    seen += got;
  }
  std::string others;
  for (const auto& [status, count] : counts)
    if (std::find(all.begin(), all.end(), status) == all.end())
      others += " " + std::to_string(count) + " x status " + std::to_string(status) + ";";
  EXPECT_EQ(seen, total) << "pages outside the interleave set or not present:" << others;
}

TEST_F(placement_checks, interleave_all_without_thp_is_exactly_balanced) {
  const auto where =
      resolve_placement(parse_placement("interleave:all"), spill_policy::never, machine()).binding;
  ASSERT_EQ(where, (node_binding{bind_mode::interleave, nodes()}));
  host_numa_source src(host_source_config{false, populate_mode::touch});
  const segment s = src.allocate(checked_bytes, where, umem::coherence::fine);
  expect_balanced(pages_by_node(s.base, s.size), nodes(), s.size / 4096, 1);
  src.deallocate(s);
}

TEST_F(placement_checks, interleave_all_with_thp_is_balanced_within_a_huge_page) {
  const auto where =
      resolve_placement(parse_placement("interleave:all"), spill_policy::never, machine()).binding;
  for (populate_mode mode : {populate_mode::touch, populate_mode::map_populate}) {
    host_numa_source src(host_source_config{true, mode});
    const segment s = src.allocate(checked_bytes, where, umem::coherence::fine);
    expect_balanced(pages_by_node(s.base, s.size), nodes(), s.size / 4096, thp_pages);
    src.deallocate(s);
  }
}

TEST_F(placement_checks, interleave_over_a_subset_stays_in_the_subset) {
  // Every other node (just node 0 on a one-node machine).
  std::vector<int> subset;
  for (std::size_t i = 0; i < nodes().size(); i += 2) subset.push_back(nodes()[i]);
  host_numa_source src(host_source_config{false, populate_mode::touch});
  const segment s =
      src.allocate(checked_bytes, {bind_mode::interleave, subset}, umem::coherence::fine);
  expect_balanced(pages_by_node(s.base, s.size), subset, s.size / 4096, 1);
  src.deallocate(s);
}

}  // namespace
}  // namespace umem::placement_test
