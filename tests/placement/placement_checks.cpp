#include "placement_checks.hpp"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "umem/numa/hwloc_source.hpp"

namespace umem::placement_test {

const umem::topology& placement_checks::machine() {
  static const umem::topology topo = [] {
    umem::topology t;
    t.numa = umem::numa::load_hwloc_live();
    std::cout << "[placement] " << t.numa.nodes.size() << " NUMA node(s):";
    for (const auto& n : t.numa.nodes)
      std::cout << " node " << n.os_index << " (" << n.cpus.size() << " CPUs)";
    std::cout << '\n';
    return t;
  }();
  return topo;
}

std::vector<int> placement_checks::nodes() {
  std::vector<int> out;
  for (const auto& n : machine().numa.nodes) out.push_back(n.os_index);
  return out;
}

const std::vector<unsigned>& placement_checks::cpus_of(int node) {
  const auto* n = machine().find_numa_node(node);
  if (!n) throw std::runtime_error("no NUMA node " + std::to_string(node) + " in the model");
  return n->cpus;
}

void placement_checks::SetUp() {
  const auto& numa = machine().numa;
  ASSERT_FALSE(numa.nodes.empty()) << "hwloc reports no NUMA node";
  ASSERT_EQ(static_cast<int>(numa.nodes.size()), numa_num_configured_nodes())
      << "hwloc and libnuma disagree on the number of NUMA nodes";
  // Test-only variable set by the VM suite's /init (tests/vm/run-vm-suite.sh).
  if (const char* expect = std::getenv("UMEM_VM_EXPECT_NODES")) {
    ASSERT_EQ(numa.nodes.size(), std::stoul(expect))
        << "UMEM_VM_EXPECT_NODES says the VM was booted with " << expect << " nodes";
  }
}

std::map<int, std::size_t> placement_checks::pages_by_node(const void* p, std::size_t n) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<void*> pages;
  for (std::size_t off = 0; off < n; off += page)
    pages.push_back(const_cast<char*>(static_cast<const char*>(p)) + off);
  std::vector<int> status(pages.size(), 0);
  if (move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0) != 0)
    ADD_FAILURE() << "move_pages: " << std::strerror(errno);
  // A page the kernel is migrating at that instant (compaction on a busy machine) has a
  // migration entry instead of a page and reads as -ENOENT; ask again for those pages, a few
  // times. A page that was never touched stays -ENOENT.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<std::size_t> absent;
    for (std::size_t i = 0; i < status.size(); ++i)
      if (status[i] == -ENOENT) absent.push_back(i);
    if (absent.empty() || absent.size() == status.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<void*> again;
    for (std::size_t i : absent) again.push_back(pages[i]);
    std::vector<int> st(again.size(), 0);
    if (move_pages(0, again.size(), again.data(), nullptr, st.data(), 0) != 0) break;
    for (std::size_t k = 0; k < absent.size(); ++k) status[absent[k]] = st[k];
  }
  std::map<int, std::size_t> counts;
  for (int s : status) ++counts[s];
  return counts;
}

void placement_checks::expect_all_on(int node, const void* p, std::size_t n) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(pages_by_node(p, n), (std::map<int, std::size_t>{{node, n / page}}))
      << "expected all " << n / page << " pages on node " << node;
}

void placement_checks::on_node_thread(int node, const std::function<void()>& fn) {
  const auto& cpus = cpus_of(node);
  ASSERT_FALSE(cpus.empty()) << "node " << node << " has no CPU to run a thread on";
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned c : cpus) CPU_SET(c, &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0) << std::strerror(errno);
    // Affinity takes effect at once for the calling thread; the kernel's view must agree.
    ASSERT_EQ(numa_node_of_cpu(sched_getcpu()), node);
    fn();
  });
  t.join();
}

}  // namespace umem::placement_test
