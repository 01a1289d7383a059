// The one meminfo parser (core/include/umem/core/detail/meminfo.hpp): /proc/meminfo and node
// meminfo lines, fields that are the end of other fields' names, absent fields, damaged lines.
#include <gtest/gtest.h>

#include <string>

#include "support/sysfs_tree.hpp"
#include "umem/core/detail/meminfo.hpp"
#include "umem/core/error.hpp"

namespace {

using umem::detail::meminfo_bytes;

const std::string proc = "/proc/meminfo";

TEST(Meminfo, ReadsSystemAndNodeLinesInBytes) {
  umem::test::sysfs_tree tree;
  const std::string system = "MemTotal:       16384 kB\nMemFree:         2048 kB\n";
  EXPECT_EQ(meminfo_bytes(tree.root(), proc, system, "MemFree"), 2048u * 1024);
  const std::string node = "Node 2 MemTotal:  4096 kB\nNode 2 Inactive(file):  12 kB\n"
                           "Node 2 Active(file):  30 kB\n";
  EXPECT_EQ(meminfo_bytes(tree.root(), "/sys/devices/system/node/node2/meminfo", node,
                          "Active(file)"),
            30u * 1024)
      << "not Inactive(file), whose name ends the same";
}

TEST(Meminfo, AnAbsentFieldIsNothing) {
  umem::test::sysfs_tree tree;
  EXPECT_FALSE(meminfo_bytes(tree.root(), proc, "MemTotal: 1 kB\n", "SwapFree").has_value());
  EXPECT_FALSE(meminfo_bytes(tree.root(), proc, "", "MemTotal").has_value());
  EXPECT_FALSE(meminfo_bytes(tree.root(), proc, "MyMemTotal: 1 kB\n", "MemTotal").has_value());
}

TEST(Meminfo, ADamagedLineIsAParseErrorNamingTheFileAndLine) {
  umem::test::sysfs_tree tree;
  for (const std::string line : {"MemFree: lots kB", "MemFree: 12", "MemFree: 12 pages",
                                 "MemFree:  kB", "MemFree: 99999999999999999999 kB"}) {
    SCOPED_TRACE(line);
    try {
      (void)meminfo_bytes(tree.root(), proc, "MemTotal: 1 kB\n" + line + "\n", "MemFree");
      ADD_FAILURE() << "no error";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), umem::errc::parse_error);
      EXPECT_NE(std::string(e.what()).find("/proc/meminfo:2: expected 'MemFree: <n> kB'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
