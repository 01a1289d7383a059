// Inside the multi-NUMA VM (tests/vm): umem's allocator fills one NUMA node to the kernel's real
// end, not to a umem limit (the limits are checked in tests/placement/pool_placement_test.cpp).
// The smallest node is filled, in 16 MiB blocks, with populate:map_populate: the only mode in
// which the host NUMA source asks the kernel for the pages at allocation time
// (host_numa_source.hpp, Note [Order of the calls]), so exhaustion can surface as umem's
// out_of_memory rather than at a later first touch.
// - spill:never: the fill ends with umem::error(out_of_memory); the program is still alive;
// - spill:warn:  the fill moves on to the node spill_order names first;
// - both: every page is where it should be (move_pages), and after freeing and trimming the
//   statistics are back to 0 and the node's free memory comes back.
// - given-back pages: a free block whose pages trim() gave back (Note [Decommitted pages] in
//   segment.hpp) is taken again only while the node can back it: with the node filled meanwhile,
//   out_of_memory; with room again, it comes back populated on the node.
// Each fill runs in a child process (exhaustion_checks.hpp), so a kernel OOM kill fails the test
// instead of ending the program.
//
// Before the host NUMA source checked a node's obtainable memory (Note [The real end of a node]
// in node_meminfo.hpp), both fills ended in the kernel's OOM killer (SIGKILL at about 705 of the
// node's 768 MiB): a strictly bound MADV_POPULATE_WRITE never returns ENOMEM.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exhaustion_checks.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;

constexpr std::size_t block_bytes = 16 * MiB;
// The kernel keeps per-node reserves (watermarks, per-CPU lists) and the fill ends at the first
// 16 MiB block that does not fit, so a fill falls short of the free memory measured before it by
// up to this much. Far smaller than any umem limit a test could mistake for the real end.
constexpr std::int64_t fill_shortfall_max = 96 * MiB;
// A leak is memory still mapped in this process: one leaked block would add 16 MiB to its resident
// size, while the allocator's and the test's bookkeeping (maps, vectors, malloc's arenas) grow it
// by about 5 MiB over a fill.
constexpr std::int64_t resident_drift_max = 12 * MiB;

class node_exhaustion : public exhaustion_checks {
 protected:
  static std::unique_ptr<allocator> make_allocator(const std::string& spill) {
    // No thread cache and no expandable segments: every block is one segment of its own, freed
    // to the kernel by trim(), so the node's free memory can be compared before and after.
    const alloc_options options = parse_alloc_conf(
        "populate:map_populate,thread_cache:0,expandable_segments:false,spill:" + spill);
    return std::make_unique<allocator>(
        options, machine(),
        std::make_unique<host_numa_source>(
            host_source_config{options.huge_pages, options.populate}),
        std::make_unique<no_gpu_mapper>("node exhaustion: host memory only"));
  }

  request on_node() const { return {placement{placement_kind::node, node_, {}}, std::nullopt}; }

  // Blocks are checked one page in 512 (one per huge page): every page of a 768 MiB node under
  // software emulation costs more guest time than the whole fill.
  std::map<int, std::size_t> sampled_nodes(const std::vector<void*>& blocks) const {
    std::map<int, std::size_t> out;
    for (void* b : blocks)
      for (std::size_t off = 0; off < block_bytes; off += 2 * MiB)
        for (const auto& [node, pages] : pages_by_node(static_cast<char*>(b) + off, 4096))
          out[node] += pages;
    return out;
  }

  // Frees `blocks`, trims, and expects nothing left: statistics at 0, this process's resident
  // memory and the node's free memory back to about what they were `before`.
  void free_all(allocator& a, std::vector<void*>& blocks, const before_fill& before) const {
    for (void* b : blocks) a.deallocate(b);
    blocks.clear();
    a.trim();
    const auto stats = a.memory_stats();
    EXPECT_EQ(stats.at("allocated_bytes.all.current"), 0);
    EXPECT_EQ(stats.at("reserved_bytes.all.current"), 0);
    EXPECT_EQ(stats.at("segment.all.current"), 0);
    expect_memory_back(before, resident_drift_max);
  }

  void fill_never() const;
  void fill_warn() const;
  void fill_over_given_back_pages() const;
};

TEST_F(node_exhaustion, never_fails_with_out_of_memory_at_the_nodes_real_end) {
  in_child([this] { fill_never(); });
}

TEST_F(node_exhaustion, warn_spills_to_the_nearest_node_at_the_nodes_real_end) {
  in_child([this] { fill_warn(); });
}

TEST_F(node_exhaustion, given_back_pages_are_taken_again_only_while_the_node_can_back_them) {
  in_child([this] { fill_over_given_back_pages(); });
}

void node_exhaustion::fill_never() const {
  auto a = make_allocator("never");
  const before_fill before = measure();
  std::vector<void*> blocks;
  std::string failure;
  // Twice the node's free memory without a failure means the kernel never refused.
  for (std::int64_t taken = 0; taken < 2 * before.node_free; taken += block_bytes) {
    try {
      blocks.push_back(a->allocate(block_bytes, on_node()));
    } catch (const umem::error& e) {
      ASSERT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
      failure = e.what();
      break;
    }
  }
  const auto filled = static_cast<std::int64_t>(blocks.size() * block_bytes);
  std::printf("[exhaustion] spill:never: node %d had %lld MiB free; filled %lld MiB, then: %s\n",
              node_, static_cast<long long>(before.node_free / MiB),
              static_cast<long long>(filled / MiB), failure.c_str());
  ASSERT_FALSE(failure.empty()) << "node " << node_ << " never ran out";
  EXPECT_NE(failure.find("node " + std::to_string(node_)), std::string::npos) << failure;
  EXPECT_GE(filled, before.node_free - fill_shortfall_max)
      << "the fill stopped before the node's end";
  EXPECT_EQ(a->memory_stats().at("spills"), 0);
  EXPECT_EQ(sampled_nodes(blocks),
            (std::map<int, std::size_t>{{node_, blocks.size() * block_bytes / (2 * MiB)}}));
  free_all(*a, blocks, before);
}

void node_exhaustion::fill_warn() const {
  auto a = make_allocator("warn");
  const int nearest = spill_order(node_, machine().numa).front();
  const before_fill before = measure();
  const std::int64_t nearest_free_before = node_free_bytes(nearest);
  std::vector<void*> home, spilled;
  for (std::int64_t taken = 0; spilled.empty() && taken < 2 * before.node_free;
       taken += block_bytes) {
    void* p = a->allocate(block_bytes, on_node());
    const auto where = pages_by_node(p, 4096);
    (where.count(node_) != 0 ? home : spilled).push_back(p);
  }
  std::printf("[exhaustion] spill:warn: node %d had %lld MiB free; %zu MiB stayed, then a block "
              "spilled to node %d\n",
              node_, static_cast<long long>(before.node_free / MiB),
              home.size() * block_bytes / MiB,
              nearest);
  ASSERT_EQ(spilled.size(), 1u) << "node " << node_ << " never ran out";
  EXPECT_EQ(a->memory_stats().at("spills"), 1);
  EXPECT_GE(static_cast<std::int64_t>(home.size() * block_bytes),
            before.node_free - fill_shortfall_max);
  EXPECT_EQ(sampled_nodes(spilled),
            (std::map<int, std::size_t>{{nearest, block_bytes / (2 * MiB)}}));
  EXPECT_EQ(sampled_nodes(home),
            (std::map<int, std::size_t>{{node_, home.size() * block_bytes / (2 * MiB)}}));
  a->deallocate(spilled.front());  // first: free_all expects the whole allocator empty
  spilled.clear();
  free_all(*a, home, before);
  EXPECT_GE(node_free_bytes(nearest), nearest_free_before - free_drift_max);
}

void node_exhaustion::fill_over_given_back_pages() const {
  constexpr std::size_t given_back = 256 * MiB;
  auto a = make_allocator("never");
  const before_fill before = measure();
  // One segment: a block at its start stays live, the rest is free and trim() gives its pages back.
  a->deallocate(a->allocate(block_bytes + given_back, on_node()));
  std::vector<void*> kept{a->allocate(block_bytes, on_node())};
  a->trim();
  ASSERT_EQ(a->memory_stats().at("segment.all.current"), 1);
  // Another allocator takes what the node has left, to its real end (fill_never's path).
  auto other = make_allocator("never");
  std::vector<void*> filler;
  try {
    for (std::int64_t taken = 0; taken < 2 * before.node_free; taken += block_bytes)
      filler.push_back(other->allocate(block_bytes, on_node()));
  } catch (const umem::error& e) {
    ASSERT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
  }
  std::string failure;
  try {
    kept.push_back(a->allocate(given_back, on_node()));
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
    failure = e.what();
  }
  std::printf("[exhaustion] given-back pages: %zu MiB given back, the node then filled with "
              "%zu MiB; taking them again: %s\n",
              given_back / MiB, filler.size() * block_bytes / MiB, failure.c_str());
  ASSERT_FALSE(failure.empty()) << "the given-back pages were handed out on a full node";
  EXPECT_NE(failure.find("given-back pages"), std::string::npos) << failure;
  EXPECT_NE(failure.find("can give"), std::string::npos) << failure;
  for (void* b : filler) other->deallocate(b);
  filler.clear();
  other->trim();
  // With room again they come back, populated there (populate:map_populate) before any touch.
  void* again = a->allocate(given_back, on_node());
  EXPECT_EQ(a->memory_stats().at("segment.all.current"), 1) << "not the given-back block";
  std::map<int, std::size_t> where;
  for (std::size_t off = 0; off < given_back; off += 2 * MiB)
    for (const auto& [node, pages] : pages_by_node(static_cast<char*>(again) + off, 4096))
      where[node] += pages;
  EXPECT_EQ(where, (std::map<int, std::size_t>{{node_, given_back / (2 * MiB)}}));
  kept.push_back(again);
  free_all(*a, kept, before);
}

}  // namespace
}  // namespace umem::placement_test
