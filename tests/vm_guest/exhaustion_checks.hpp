// What the VM's node-filling tests share (node_exhaustion_test.cpp through umem's allocator,
// torch_host_exhaustion_test.cpp through the torch bridge's C ABI): the node to fill, the
// process's resident size and a node's free memory before and after, the tolerances for both,
// and running a fill in a child process.
//
// Each fill runs in a child process (a gtest death test), so a kernel OOM kill shows as a failure
// "killed by signal 9" next to the kernel's "Out of memory: Killed process" line on the console,
// and the program goes on with its other tests; a process-wide singleton (the torch bridge)
// starts afresh in each child as well.
//
// Outside the VM (UMEM_VM_EXPECT_NODES unset) every test skips: filling a node of a shared build
// machine would push its other work into the kernel's OOM killer.
#pragma once

#include <gtest/gtest-spi.h>
#include <numa.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "placement_checks.hpp"

namespace umem::placement_test {

inline constexpr std::size_t MiB = std::size_t{1} << 20;
// What the kernel itself may take or give on the node meanwhile (page tables, slab, and after a
// fill to the very end what it reclaimed and allocated there under pressure: 29 MiB seen).
inline constexpr std::int64_t free_drift_max = 64 * MiB;

// This process's resident size (VmRSS): memory still mapped after everything was freed shows
// here, whatever node it is on.
inline std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) {
    ADD_FAILURE() << "cannot read /proc/self/status";
    return 0;
  }
  char line[256];
  long long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmRSS: %lld kB", &kib) == 1) break;
  std::fclose(f);
  if (kib < 0) ADD_FAILURE() << "no VmRSS in /proc/self/status";
  return kib * 1024;
}

// The node's MemFree as libnuma reads it (the kernel's view, not umem's).
inline std::int64_t node_free_bytes(int node) {
  long long free_bytes = 0;
  if (numa_node_size64(node, &free_bytes) < 0) ADD_FAILURE() << "numa_node_size64(" << node << ")";
  return free_bytes;
}

class exhaustion_checks : public placement_checks {
 protected:
  // Fills the smallest node (node 2 in run-vm-suite.sh's shape): the quickest to fill, and the
  // one whose neighbours surely have room for a spilled block.
  void SetUp() override {
    if (std::getenv("UMEM_VM_EXPECT_NODES") == nullptr)
      GTEST_SKIP() << "UMEM_VM_EXPECT_NODES is unset: this test fills a NUMA node to its end and "
                      "runs only inside the VM (tests/vm/run-vm-suite.sh)";
    placement_checks::SetUp();
    if (HasFatalFailure()) return;
    if (nodes().size() < 2) GTEST_SKIP() << "spilling needs a second NUMA node";
    node_ = nodes().front();
    for (const auto& n : machine().numa.nodes)
      if (n.memory_total_bytes < machine().find_numa_node(node_)->memory_total_bytes)
        node_ = n.os_index;
  }

  // What the checks after a fill compare with, measured before it.
  struct before_fill {
    std::int64_t resident, node_free;
  };
  before_fill measure() const { return {resident_bytes(), node_free_bytes(node_)}; }

  // After everything was freed and given back: no more than `resident_drift_max` is still mapped
  // (what the fill's bookkeeping grew by, less than one block), and the node has its memory back.
  void expect_memory_back(const before_fill& before, std::int64_t resident_drift_max) const {
    EXPECT_LE(resident_bytes(), before.resident + resident_drift_max) << "memory still mapped";
    EXPECT_GE(node_free_bytes(node_), before.node_free - free_drift_max)
        << "node " << node_ << "'s memory did not come back after everything was freed";
  }

  // Runs `fill` in a death test's child: passes when the child exits 0 (every check held).
  static void in_child(const std::function<void()>& fill) {
    // A death test's child forwards no events, so its failures are collected here and printed
    // to stderr, which the parent shows as the child's message.
    EXPECT_EXIT(
        {
          ::testing::TestPartResultArray failures;
          {
            const ::testing::ScopedFakeTestPartResultReporter collect(
                ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &failures);
            fill();
          }
          for (int i = 0; i < failures.size(); ++i) {
            const ::testing::TestPartResult& r = failures.GetTestPartResult(i);
            std::fprintf(stderr, "%s:%d: %s\n", r.file_name() ? r.file_name() : "?",
                         r.line_number(), r.message());
          }
          std::fflush(stdout);
          std::exit(failures.size() == 0 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }

  int node_ = -1;
};

}  // namespace umem::placement_test
