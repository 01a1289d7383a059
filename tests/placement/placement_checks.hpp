// The fixture of umem_placement_checks: the NUMA nodes of the machine the program runs on, and
// checks of where pages really are, asked of the kernel directly (move_pages, getcpu), never
// through umem's own wrappers.
//
// Note [Adapting to the machine]
// Every check loops over the nodes hwloc reports (umem::numa::load_hwloc_live, the model the
// allocator resolves against): N = 1 on a build machine, N = 4 in the VM suite. The fixture
// checks that libnuma sees as many nodes, and, when UMEM_VM_EXPECT_NODES is set (the VM suite's
// /init sets it), that N is that number, so a VM that booted with the wrong shape fails instead
// of passing trivially on one node.
//
// Note [Adding caching-pool checks]
// Checks at the level of the caching pool (a block freed on node N and reused stays on N; a full
// node spills to spill_order's nearest node; `never` fails without leaking) go in a new
// pool_placement_test.cpp here as TEST_F(placement_checks, pool_...), using nodes(),
// checked_bytes, pages_by_node(), expect_all_on() and on_node_thread(). The CMakeLists picks up
// any *_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::placement_test {

class placement_checks : public ::testing::Test {
 protected:
  // 32 MiB: 8192 base pages, 16 huge pages; small enough for a 768 MiB VM node and quick under
  // QEMU's software emulation.
  static constexpr std::size_t checked_bytes = std::size_t{32} << 20;
  static constexpr std::size_t thp_pages = 512;  // 4 KiB pages per 2 MiB huge page

  // The machine's topology as the allocator sees it (live hwloc), loaded once per program.
  static const umem::topology& machine();
  // OS indices of the NUMA nodes, ascending.
  static std::vector<int> nodes();
  // The CPUs of `node` from the model (empty for a memory-only node).
  static const std::vector<unsigned>& cpus_of(int node);

  // move_pages(nodes=NULL) over [p, p+n): count per node; negative keys are the -errno statuses
  // (-ENOENT never touched; -EFAULT unmapped, or never touched on Linux 6.1).
  static std::map<int, std::size_t> pages_by_node(const void* p, std::size_t n);
  // Every page of [p, p+n) is present on `node`.
  static void expect_all_on(int node, const void* p, std::size_t n);
  // Runs `fn` on a new thread confined to `node`'s CPUs (sched_setaffinity) and joins it; fails
  // the test if the kernel then reports the thread on another node.
  static void on_node_thread(int node, const std::function<void()>& fn);

  void SetUp() override;
};

}  // namespace umem::placement_test
