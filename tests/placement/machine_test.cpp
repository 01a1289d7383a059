// What the other checks rely on: the NUMA nodes of this machine as the model and the kernel see
// them (the fixture's SetUp compares hwloc, libnuma and UMEM_VM_EXPECT_NODES).
#include <gtest/gtest.h>

#include "placement_checks.hpp"
#include "umem/allocator/source/os_memory.hpp"

namespace umem::placement_test {
namespace {

TEST_F(placement_checks, model_nodes_are_the_nodes_the_allocator_may_use) {
  EXPECT_EQ(nodes(), umem::alloc::os::allowed_nodes());
}

TEST_F(placement_checks, distance_matrix_is_square_with_10_on_the_diagonal) {
  const auto& numa = machine().numa;
  ASSERT_EQ(numa.distances.size(), numa.nodes.size());
  for (std::size_t i = 0; i < numa.nodes.size(); ++i) {
    ASSERT_EQ(numa.distances[i].size(), numa.nodes.size());
    EXPECT_EQ(numa.distances[i][i], 10u);
  }
}

}  // namespace
}  // namespace umem::placement_test
