// The assembled allocator (caching pool over the host NUMA source) on every node of the machine:
// reuse stays on its node, blocks never move between nodes, `never` fails cleanly at a node's
// limit, `warn` spills to the nearest node and counts it. Pages are checked with move_pages.
#include <cstring>
#include <memory>
#include <string>

#include "placement_checks.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

constexpr std::size_t MiB = std::size_t{1} << 20;

request on(int node) { return {placement{placement_kind::node, node, {}}, std::nullopt}; }

class pool_placement : public placement_checks {
 protected:
  static std::unique_ptr<allocator> make_allocator(const std::string& conf) {
    const alloc_options options = parse_alloc_conf(conf);
    return std::make_unique<allocator>(
        options, machine(),
        std::make_unique<host_numa_source>(
            host_source_config{options.huge_pages, options.populate}),
        std::make_unique<no_gpu_mapper>("placement checks: host memory only"));
  }
};

TEST_F(pool_placement, reused_blocks_stay_on_their_node) {
  auto a = make_allocator("populate:touch");
  for (int n : nodes()) {
    void* p = a->allocate(8 * MiB, on(n));
    expect_all_on(n, p, 8 * MiB);
    a->deallocate(p);
    void* q = a->allocate(8 * MiB, on(n));
    EXPECT_EQ(q, p) << "node " << n << ": the cached block is reused";
    std::memset(q, 0x5a, 8 * MiB);
    expect_all_on(n, q, 8 * MiB);
    a->deallocate(q);
  }
  EXPECT_GE(a->memory_stats().at("cache_hits"), static_cast<std::int64_t>(nodes().size()));
}

TEST_F(pool_placement, a_block_freed_on_one_node_is_never_handed_out_for_another) {
  auto a = make_allocator("populate:touch");
  std::vector<void*> freed;
  for (int n : nodes()) {
    void* p = a->allocate(4 * MiB, on(n));
    freed.push_back(p);
    a->deallocate(p);
  }
  for (std::size_t i = 0; i < nodes().size(); ++i) {
    const int n = nodes()[i];
    void* p = a->allocate(4 * MiB, on(n));
    for (std::size_t j = 0; j < freed.size(); ++j) {
      if (j == i) continue;
      EXPECT_NE(p, freed[j]) << "node " << n << " got node " << nodes()[j] << "'s block";
    }
    std::memset(p, 1, 4 * MiB);
    expect_all_on(n, p, 4 * MiB);
    a->deallocate(p);
  }
}

TEST_F(pool_placement, never_fails_at_the_limit_without_leaking) {
  for (int n : nodes()) {
    auto a = make_allocator("populate:touch,limit.node" + std::to_string(n) + ":16MiB");
    void* p = a->allocate(16 * MiB, on(n));
    try {
      (void)a->allocate(2 * MiB, on(n));
      ADD_FAILURE() << "node " << n << ": allocation past limit.node" << n << " succeeded";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), umem::errc::out_of_memory);
      EXPECT_NE(std::string(e.what()).find("limit.node" + std::to_string(n)), std::string::npos)
          << e.what();
    }
    const auto stats = a->memory_stats();
    EXPECT_EQ(stats.at("allocation.all.current"), 1);
    EXPECT_EQ(stats.at("reserved_bytes.all.current"), static_cast<std::int64_t>(16 * MiB));
    EXPECT_EQ(stats.at("num_ooms"), 1);
    a->deallocate(p);
  }
}

TEST_F(pool_placement, warn_spills_to_the_nearest_node_and_counts_it) {
  if (nodes().size() < 2) GTEST_SKIP() << "spilling needs a second NUMA node (the VM suite has 4)";
  for (int n : nodes()) {
    auto a = make_allocator("populate:touch,spill:warn,limit.node" + std::to_string(n) + ":16MiB");
    void* full = a->allocate(16 * MiB, on(n));
    void* spilled = a->allocate(8 * MiB, on(n));
    const int nearest = spill_order(n, machine().numa).front();
    expect_all_on(nearest, spilled, 8 * MiB);
    const auto stats = a->memory_stats();
    EXPECT_EQ(stats.at("spills"), 1);
    // Statistics, the residency report and move_pages agree on where the bytes are.
    const auto r = a->residency(spilled, 8 * MiB);
    EXPECT_EQ(r.pages_per_node.at(nearest), pages_by_node(spilled, 8 * MiB).at(nearest));
    EXPECT_EQ(stats.at("allocated_bytes.node" + std::to_string(nearest) + "_fine.current"),
              static_cast<std::int64_t>(8 * MiB));
    a->deallocate(full);
    a->deallocate(spilled);
  }
}

}  // namespace
}  // namespace umem::placement_test
