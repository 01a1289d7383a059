// node:N for every node of the machine: every page lands on N, however the segment is populated,
// and whichever thread touches it first.
#include <gtest/gtest.h>

#include <cstring>

#include "placement_checks.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/placement_resolver.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

TEST_F(placement_checks, node_n_puts_every_page_on_n_for_each_population_mode) {
  for (int n : nodes()) {
    const auto where = resolve_placement(parse_placement("node:" + std::to_string(n)),
                                         spill_policy::never, machine())
                           .binding;
    ASSERT_EQ(where, (node_binding{bind_mode::bind, {n}}));
    for (const host_source_config cfg :
         {host_source_config{true, populate_mode::touch},
          host_source_config{false, populate_mode::touch},
          host_source_config{true, populate_mode::map_populate}}) {
      SCOPED_TRACE("node " + std::to_string(n) + ", " + host_numa_source(cfg).describe());
      host_numa_source src(cfg);
      const segment s = src.allocate(checked_bytes, where, umem::coherence::fine);
      expect_all_on(n, s.base, s.size);
      src.deallocate(s);
    }
  }
}

TEST_F(placement_checks, bind_wins_over_the_first_touching_threads_node) {
  // Populated lazily, then written from a thread on every other node in turn.
  for (int n : nodes()) {
    host_numa_source src(host_source_config{true, populate_mode::none});
    const segment s = src.allocate(checked_bytes, {bind_mode::bind, {n}}, umem::coherence::fine);
    EXPECT_EQ(pages_by_node(s.base, s.size).count(n), 0u) << "nothing is present before a touch";
    const auto all = nodes();
    const std::size_t share = s.size / all.size();
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (cpus_of(all[i]).empty()) continue;
      on_node_thread(all[i], [&] { std::memset(static_cast<char*>(s.base) + i * share, 1, share); });
    }
    std::memset(s.base, 2, s.size);  // whatever no thread wrote
    expect_all_on(n, s.base, s.size);
    src.deallocate(s);
  }
}

TEST_F(placement_checks, preferred_n_puts_every_page_on_n_when_n_has_room) {
  for (int n : nodes()) {
    host_numa_source src(host_source_config{true, populate_mode::touch});
    const segment s =
        src.allocate(checked_bytes, {bind_mode::preferred, {n}}, umem::coherence::fine);
    expect_all_on(n, s.base, s.size);
    src.deallocate(s);
  }
}

}  // namespace
}  // namespace umem::placement_test
