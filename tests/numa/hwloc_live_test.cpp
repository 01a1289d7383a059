// load_hwloc_live against facts the test reads from the kernel itself (sysfs, affinity).
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/fixtures.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path node_dir = "/sys/devices/system/node";

// A kernel cpulist/nodelist ("0-3,8,10-11").
std::vector<unsigned> parse_list(const std::string& text) {
  std::vector<unsigned> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.find_first_not_of(" \n") == std::string::npos) continue;
    const auto dash = part.find('-');
    const unsigned lo = static_cast<unsigned>(std::stoul(part.substr(0, dash)));
    const unsigned hi =
        dash == std::string::npos ? lo : static_cast<unsigned>(std::stoul(part.substr(dash + 1)));
    for (unsigned c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

// "Node N MemTotal:  5073108 kB" of nodeN/meminfo, in bytes.
std::uint64_t node_mem_total(unsigned node) {
  std::ifstream in(node_dir / ("node" + std::to_string(node)) / "meminfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("MemTotal:");
    if (at != std::string::npos) return std::stoull(line.substr(at + 9)) * 1024;
  }
  return 0;
}

}  // namespace

TEST(hwloc_live, nodes_match_the_kernels_node_directory) {
  if (!fs::exists(node_dir / "online")) GTEST_SKIP() << "no " << node_dir / "online";
  const auto online = parse_list(umem::test::read_text(node_dir / "online"));
  const umem::numa_topology t = umem::numa::load_hwloc_live();

  ASSERT_EQ(t.nodes.size(), online.size());
  for (std::size_t i = 0; i < online.size(); ++i) {
    const auto& n = t.nodes[i];
    const fs::path dir = node_dir / ("node" + std::to_string(online[i]));
    SCOPED_TRACE(dir.string());
    EXPECT_EQ(n.os_index, static_cast<int>(online[i]));
    EXPECT_EQ(n.cpus, parse_list(umem::test::read_text(dir / "cpulist")));
    // nodeN/meminfo, not /proc/meminfo: on this project's VM memory is hot-plugged while it
    // runs, so node0's MemTotal (5.0, later 6.5 GB) is far below /proc/meminfo's 24 GB; the
    // node's own figure is the one placement depends on. Read after loading, within 1%.
    const double kernel_total = static_cast<double>(node_mem_total(online[i]));
    ASSERT_GT(kernel_total, 0.0);
    EXPECT_NEAR(static_cast<double>(n.memory_total_bytes), kernel_total, kernel_total * 0.01);
    ASSERT_TRUE(n.memory_free_bytes.has_value()) << "libnuma reads nodeN/meminfo on Linux";
    EXPECT_LE(*n.memory_free_bytes, n.memory_total_bytes);
  }
}

TEST(hwloc_live, every_cpu_this_process_may_use_belongs_to_a_node) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const auto t = umem::numa::load_hwloc_live();
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    const auto owners =
        std::count_if(t.nodes.begin(), t.nodes.end(), [&](const umem::numa_node& n) {
          return std::find(n.cpus.begin(), n.cpus.end(), c) != n.cpus.end();
        });
    EXPECT_EQ(owners, 1) << "CPU " << c << " is in sched_getaffinity";
  }
}

TEST(hwloc_live, distances_match_the_kernels_slit) {
  const auto t = umem::numa::load_hwloc_live();
  if (t.nodes.size() == 1) {
    // This project's VM: one node; hwloc gives no matrix for it, the loader states the local one.
    EXPECT_EQ(t.distances, (std::vector<std::vector<std::uint32_t>>{{10}}));
    return;
  }
  ASSERT_EQ(t.distances.size(), t.nodes.size());
  for (std::size_t i = 0; i < t.nodes.size(); ++i) {
    std::stringstream row(umem::test::read_text(
        node_dir / ("node" + std::to_string(t.nodes[i].os_index)) / "distance"));
    std::vector<std::uint32_t> expected;
    for (std::uint32_t v = 0; row >> v;) expected.push_back(v);
    EXPECT_EQ(t.distances[i], expected) << "node " << t.nodes[i].os_index;
  }
}
