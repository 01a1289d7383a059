#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "umem/core/detail/text.hpp"

namespace umem::detail {
namespace {

TEST(Text, IdRangesCompressRunsInOrder) {
  // numactl capture, "node 0 cpus: 0 1 ... 23 96 ... 119".
  std::vector<unsigned> cpus;
  for (unsigned c = 0; c <= 23; ++c) cpus.push_back(c);
  for (unsigned c = 96; c <= 119; ++c) cpus.push_back(c);
  EXPECT_EQ(format_id_ranges(cpus), "0-23,96-119");
  EXPECT_EQ(format_id_ranges(std::vector<unsigned>{5}), "5");
  EXPECT_EQ(format_id_ranges(std::vector<int>{7, 1, 4, 3}), "1,3-4,7");  // sorted first
  EXPECT_EQ(format_id_ranges(std::vector<int>{}), "");
}

TEST(Text, TrimHexAndJoin) {
  EXPECT_EQ(trim(" \t kind:fine\r\n"), "kind:fine");
  EXPECT_EQ(trim(" \t\r\n"), "");
  EXPECT_EQ(trim_right("  a b \r"), "  a b");
  EXPECT_EQ(trim_right(" \t"), "");
  EXPECT_EQ(hex(std::uintmax_t{0x1002}), "0x1002");  // PCI vendor ids as rocminfo prints them
  EXPECT_EQ(hex(static_cast<const void*>(nullptr)), "0x0");
  EXPECT_EQ(join(std::vector<std::string>{"a", "b", "c"}, "; "), "a; b; c");
  EXPECT_EQ(join(std::vector<int>{0, 2, 3}, ","), "0,2,3");
  EXPECT_EQ(join(std::vector<int>{}, ","), "");
}

}  // namespace
}  // namespace umem::detail
