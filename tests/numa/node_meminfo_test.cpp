// node_meminfo (Note [The real end of a node]): counters read from a node's meminfo in a fake
// tree written in the kernel's format, the obtainable estimate computed by hand from them, and a
// malformed line as an error naming the file.
#include <gtest/gtest.h>

#include <string>

#include "support/sysfs_tree.hpp"
#include "umem/core/error.hpp"
#include "umem/numa/node_meminfo.hpp"

namespace umem::numa {
namespace {

constexpr std::uint64_t kib = 1024;

std::string node_text(int n, std::uint64_t total_kb, std::uint64_t free_kb,
                      std::uint64_t active_file_kb, std::uint64_t inactive_file_kb) {
  const std::string p = "Node " + std::to_string(n) + " ";
  return p + "MemTotal:       " + std::to_string(total_kb) + " kB\n" + p + "MemFree:        " +
         std::to_string(free_kb) + " kB\n" + p + "MemUsed:         1000 kB\n" + p +
         "Active(file):   " + std::to_string(active_file_kb) + " kB\n" + p +
         "Inactive(file): " + std::to_string(inactive_file_kb) + " kB\n" + p +
         "Inactive(anon):      7 kB\n";
}

TEST(node_meminfo, reads_a_field_of_one_node_and_nothing_for_what_is_absent) {
  test::sysfs_tree t{{"/sys/devices/system/node/node1/meminfo",
                      node_text(1, 786432, 500000, 1000, 3000)}};
  EXPECT_EQ(node_meminfo_bytes(t.root(), 1, "MemFree"), 500000 * kib);
  EXPECT_EQ(node_meminfo_bytes(t.root(), 1, "Inactive(file)"), 3000 * kib);
  EXPECT_EQ(node_meminfo_bytes(t.root(), 1, "Active(file)"), 1000 * kib);  // not Inactive's line
  EXPECT_EQ(node_meminfo_bytes(t.root(), 1, "HugePages_Total"), std::nullopt);
  EXPECT_EQ(node_meminfo_bytes(t.root(), 0, "MemFree"), std::nullopt);
  EXPECT_EQ(node_obtainable_bytes(t.root(), 0), std::nullopt);
}

TEST(node_meminfo, obtainable_is_free_plus_half_the_file_pages_plus_swap_less_the_reserve) {
  test::sysfs_tree t{{"/sys/devices/system/node/node2/meminfo",
                      node_text(2, 786432, 200000, 10000, 30000)},
                     {"/proc/meminfo", "MemTotal: 4000000 kB\nSwapFree:  4096 kB\n"}};
  // 200000 + (10000 + 30000) / 2 + 4096 kB, less the 32 MiB floor (786432 kB / 512 is less).
  EXPECT_EQ(node_obtainable_bytes(t.root(), 2), (200000 + 20000 + 4096 - 32768) * kib);
  test::sysfs_tree big{{"/sys/devices/system/node/node0/meminfo",
                        node_text(0, 128 * 1024 * 1024, 50000000, 0, 0)}};
  // A 128 GiB node keeps 1/512 of it (256 MiB) back; no /proc/meminfo: no swap.
  EXPECT_EQ(node_obtainable_bytes(big.root(), 0), (50000000 - 262144) * kib);
  test::sysfs_tree full{{"/sys/devices/system/node/node0/meminfo", node_text(0, 786432, 1000, 0, 0)}};
  EXPECT_EQ(node_obtainable_bytes(full.root(), 0), 0u);
}

TEST(node_meminfo, a_line_not_in_the_kernels_format_is_an_error_naming_the_file) {
  test::sysfs_tree t{{"/sys/devices/system/node/node0/meminfo", "Node 0 MemFree: lots\n"}};
  try {
    (void)node_obtainable_bytes(t.root(), 0);
    ADD_FAILURE() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::parse_error);
    EXPECT_NE(std::string(e.what()).find("node0/meminfo:1: expected 'MemFree: <n> kB', got "
                                         "'Node 0 MemFree: lots'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace umem::numa
