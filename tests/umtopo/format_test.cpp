#include <gtest/gtest.h>

#include "report.hpp"

namespace umem::umtopo {
namespace {

TEST(Format, GibHasOneDecimal) {
  EXPECT_EQ(format_gib(128193ull << 20), "125.2 GiB");  // numactl "node 0 size: 128193 MB"
  EXPECT_EQ(format_gib(98647808ull << 10), "94.1 GiB");  // rocminfo GPU pool "98647808(0x5e13f00) KB"
  EXPECT_EQ(format_gib(0), "0.0 GiB");
}

TEST(Format, ExactBytesUseTheLargestExactUnit) {
  EXPECT_EQ(format_exact_bytes(4096), "4 KiB");
  EXPECT_EQ(format_exact_bytes(2048ull << 10), "2 MiB");  // "Alloc Recommended Granule:2048KB"
  EXPECT_EQ(format_exact_bytes(64ull << 10), "64 KiB");
  EXPECT_EQ(format_exact_bytes(1536), "1536 B");
  EXPECT_EQ(format_exact_bytes(0), "0 B");
}

}  // namespace
}  // namespace umem::umtopo
