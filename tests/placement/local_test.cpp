// `local` from a thread on each node: resolves to that node, and the memory lands there.
#include <gtest/gtest.h>

#include <cstring>

#include "placement_checks.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/placement_resolver.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

TEST_F(placement_checks, local_from_a_thread_on_each_node_lands_on_that_node) {
  for (int n : nodes()) {
    if (cpus_of(n).empty()) continue;  // a memory-only node has no thread to be local to
    SCOPED_TRACE("thread on node " + std::to_string(n));
    on_node_thread(n, [&] {
      const auto r = resolve_placement(parse_placement("local"), spill_policy::warn, machine());
      EXPECT_EQ(r.binding, (node_binding{bind_mode::bind, {n}}));
      EXPECT_EQ(r.spill_nodes, spill_order(n, machine().numa));
      // populate none: the first touch happens here, on this node's thread.
      host_numa_source src(host_source_config{true, populate_mode::none});
      const segment s = src.allocate(checked_bytes, r.binding, umem::coherence::fine);
      std::memset(s.base, 1, s.size);
      expect_all_on(n, s.base, s.size);
      src.deallocate(s);
    });
  }
}

TEST_F(placement_checks, touch_population_runs_on_the_target_node_for_any_caller) {
  // The caller sits on the first node; the segment is for each node in turn.
  const int caller = nodes().front();
  if (cpus_of(caller).empty()) GTEST_SKIP() << "node " << caller << " has no CPU";
  on_node_thread(caller, [&] {
    for (int n : nodes()) {
      host_numa_source src(host_source_config{false, populate_mode::touch});
      const segment s = src.allocate(checked_bytes, {bind_mode::bind, {n}}, umem::coherence::fine);
      expect_all_on(n, s.base, s.size);
      src.deallocate(s);
    }
  });
}

}  // namespace
}  // namespace umem::placement_test
