// Inside the multi-NUMA VM (tests/vm): `umem.torch.empty(..., node=N)`'s allocation path filled
// to a NUMA node's real end. The VM has no Python, so this program calls what umem.torch.empty
// calls (python/umem/torch/host_tensors.py): the torch bridge's C ABI
// umem_torch_host_malloc(nbytes, node) and umem_torch_host_free
// (torch_bridge/include/umem/umem_torch.h), a named stand-in for the Python call. That Python
// turns the failing status into a typed exception (umem.UmemError, status UMEM_ERR_OUT_OF_MEMORY)
// is tested on the build machine in tests/python/test_errors.py:
// test_empty_past_the_nodes_memory_raises_out_of_memory_naming_the_node.
//
// The bridge is configured as a Python user would (umem_torch_init with UMEM_ALLOC_CONF text that
// sets only `spill`: default populate, thread cache and expandable segments), and every block is
// written once after it is obtained, as a tensor would be: with populate:none the pages are asked
// for at that first touch, so an estimate that let a block through past the node's end would end
// in the kernel's OOM killer here.
// - spill:never: the fill of the smallest node (node 2) in 64 MiB blocks ends with
//   UMEM_ERR_OUT_OF_MEMORY naming the node, after most of the node's free memory; every page was
//   on the node; after umem_torch_host_free and umem_torch_empty_cache the resident size and the
//   node's free memory are back;
// - spill:warn: the block past the node's end is served from spill_order's nearest node.
// The bridge is one per process, so each configuration runs in its own child process
// (exhaustion_checks.hpp), which also turns a kernel OOM kill into a failed test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "exhaustion_checks.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/umem_torch.h"

namespace umem::placement_test {
namespace {

constexpr std::size_t block_bytes = 64 * MiB;
// The fill ends at the first block the node cannot give, after the kernel's reserve that the
// host NUMA source leaves (32 MiB, Note [The real end of a node] in node_meminfo.hpp): short of
// the free memory measured before by up to one block and the reserve, plus what the kernel took
// meanwhile.
constexpr std::int64_t fill_shortfall_max = static_cast<std::int64_t>(block_bytes) + 64 * MiB;
// Freed blocks the bridge still held (its cache, a thread cache) would show as resident memory:
// the bookkeeping alone grows it by a few MiB, one kept block by 64 MiB.
constexpr std::int64_t resident_drift_max = 16 * MiB;

// Writes one byte per page, as filling a tensor would: under populate:none this is where the
// kernel places (and could refuse) the pages.
void touch(void* p) {
  for (std::size_t off = 0; off < block_bytes; off += 4096) static_cast<volatile char*>(p)[off] = 1;
}

umem_torch_device_stats host_stats() {
  umem_torch_device_stats s{};
  EXPECT_EQ(umem_torch_get_device_stats(-1, &s), UMEM_OK) << umem_torch_last_error();
  return s;
}

class torch_host_exhaustion : public exhaustion_checks {
 protected:
  // Every page of `blocks` (move_pages), per node.
  static std::map<int, std::size_t> pages_of(const std::vector<void*>& blocks) {
    std::map<int, std::size_t> out;
    for (void* b : blocks)
      for (const auto& [node, pages] : pages_by_node(b, block_bytes)) out[node] += pages;
    return out;
  }

  static std::map<int, std::size_t> all_on(int node, std::size_t n_blocks) {
    return {{node, n_blocks * block_bytes / 4096}};
  }

  // umem_torch_host_free of every block, umem_torch_empty_cache, then nothing left: the bridge's
  // statistics at 0, the resident size and the node's free memory back.
  void free_all(std::vector<void*>& blocks, const before_fill& before) const {
    for (void* b : blocks) EXPECT_EQ(umem_torch_host_free(b), UMEM_OK) << umem_torch_last_error();
    const auto filled = blocks.size() * block_bytes;
    blocks.clear();
    std::size_t released = 0;
    ASSERT_EQ(umem_torch_empty_cache(1, &released), UMEM_OK) << umem_torch_last_error();
    EXPECT_GE(released, filled) << "empty_cache gave back less than the fill took";
    const auto s = host_stats();
    EXPECT_EQ(s.allocated_bytes[0].current, 0);
    EXPECT_EQ(s.reserved_bytes[0].current, 0);
    EXPECT_EQ(s.segment[0].current, 0);
    expect_memory_back(before, resident_drift_max);
  }

  void fill_never() const;
  void fill_warn() const;
};

TEST_F(torch_host_exhaustion, never_fails_with_out_of_memory_at_the_nodes_real_end) {
  in_child([this] { fill_never(); });
}

TEST_F(torch_host_exhaustion, warn_spills_to_the_nearest_node_at_the_nodes_real_end) {
  in_child([this] { fill_warn(); });
}

void torch_host_exhaustion::fill_never() const {
  ASSERT_EQ(umem_torch_init("spill:never"), UMEM_OK) << umem_torch_last_error();
  const before_fill before = measure();
  std::vector<void*> blocks;
  umem_status status = UMEM_OK;
  std::string failure;
  // Twice the node's free memory without a failure means the node never refused.
  for (std::int64_t taken = 0; taken < 2 * before.node_free; taken += block_bytes) {
    void* p = nullptr;
    status = umem_torch_host_malloc(block_bytes, node_, &p);
    if (status != UMEM_OK) {
      failure = umem_torch_last_error();
      EXPECT_EQ(p, nullptr);
      break;
    }
    touch(p);
    blocks.push_back(p);
  }
  const auto filled = static_cast<std::int64_t>(blocks.size() * block_bytes);
  std::printf("[torch exhaustion] spill:never: node %d had %lld MiB free; umem_torch_host_malloc "
              "gave %lld MiB, then status %d: %s\n",
              node_, static_cast<long long>(before.node_free / MiB),
              static_cast<long long>(filled / MiB), static_cast<int>(status), failure.c_str());
  ASSERT_NE(status, UMEM_OK) << "node " << node_ << " never ran out";
  EXPECT_EQ(status, UMEM_ERR_OUT_OF_MEMORY) << failure;
  EXPECT_EQ(umem_torch_last_status(), UMEM_ERR_OUT_OF_MEMORY);
  EXPECT_NE(failure.find("node " + std::to_string(node_)), std::string::npos) << failure;
  EXPECT_GE(filled, before.node_free - fill_shortfall_max)
      << "the fill stopped before the node's end";
  EXPECT_EQ(host_stats().num_ooms, 1);
  EXPECT_EQ(pages_of(blocks), all_on(node_, blocks.size()));
  free_all(blocks, before);
}

void torch_host_exhaustion::fill_warn() const {
  ASSERT_EQ(umem_torch_init("spill:warn"), UMEM_OK) << umem_torch_last_error();
  const int nearest = alloc::spill_order(node_, machine().numa).front();
  const before_fill before = measure();
  const std::int64_t nearest_free_before = node_free_bytes(nearest);
  std::vector<void*> home, spilled;
  for (std::int64_t taken = 0; spilled.empty() && taken < 2 * before.node_free;
       taken += block_bytes) {
    void* p = nullptr;
    ASSERT_EQ(umem_torch_host_malloc(block_bytes, node_, &p), UMEM_OK) << umem_torch_last_error();
    touch(p);
    (pages_by_node(p, 4096).count(node_) != 0 ? home : spilled).push_back(p);
  }
  std::printf("[torch exhaustion] spill:warn: node %d had %lld MiB free; %zu MiB stayed, then a "
              "block came from node %d\n",
              node_, static_cast<long long>(before.node_free / MiB),
              home.size() * block_bytes / MiB,
              spilled.empty() ? -1 : pages_by_node(spilled.front(), 4096).begin()->first);
  ASSERT_EQ(spilled.size(), 1u) << "node " << node_ << " never ran out";
  EXPECT_GE(static_cast<std::int64_t>(home.size() * block_bytes),
            before.node_free - fill_shortfall_max);
  EXPECT_EQ(pages_of(spilled), all_on(nearest, 1));
  EXPECT_EQ(pages_of(home), all_on(node_, home.size()));
  EXPECT_EQ(host_stats().num_ooms, 0) << "a spill is not an out-of-memory";
  home.push_back(spilled.front());
  spilled.clear();
  free_all(home, before);
  EXPECT_GE(node_free_bytes(nearest), nearest_free_before - free_drift_max);
}

}  // namespace
}  // namespace umem::placement_test
