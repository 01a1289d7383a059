// parse_kfd_properties: the "key value" format every KFD properties file uses.
#include <gtest/gtest.h>

#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace umem::hsa {
namespace {

// Expects parse_kfd_properties(text) to throw parse_error whose message contains `needle`.
void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    parse_kfd_properties(text, "props.txt");
    ADD_FAILURE() << "no error for: " << text;
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::parse_error);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KfdProperties, ParsesKeyValueLines) {
  const auto p = parse_kfd_properties("heap_type 1\nsize_in_bytes 25767706624\n\nflags 0\n", "x");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p.at("heap_type"), 1u);
  EXPECT_EQ(p.at("size_in_bytes"), 25767706624u);
  EXPECT_EQ(p.at("flags"), 0u);
}

TEST(KfdProperties, AcceptsFullUnsigned64BitValues) {
  // unique_id values above INT64_MAX occur in the real MI300A capture (node 5, its line 273).
  const auto p = parse_kfd_properties("unique_id 18446744073709551615", "x");
  EXPECT_EQ(p.at("unique_id"), 18446744073709551615u);
}

TEST(KfdProperties, ToleratesCrLfAndTabs) {
  const auto p = parse_kfd_properties("simd_count\t912\r\nnum_xcc 6  \r\n", "x");
  EXPECT_EQ(p.at("simd_count"), 912u);
  EXPECT_EQ(p.at("num_xcc"), 6u);
}

TEST(KfdProperties, EmptyTextIsEmptyMap) { EXPECT_TRUE(parse_kfd_properties("", "x").empty()); }

TEST(KfdProperties, RejectsMalformedLinesNamingOriginAndLine) {
  expect_parse_error("simd_count 0\nnum_xcc six\n", "props.txt:2:");
  expect_parse_error("simd_count 0\nnum_xcc\n", "props.txt:2:");
  expect_parse_error("simd_count -1\n", "props.txt:1:");
  expect_parse_error("simd_count 1 2\n", "props.txt:1:");
  expect_parse_error("1st_key 1\n", "props.txt:1:");
  expect_parse_error("a 0\nb 0\nhive_id 18446744073709551616\n", "props.txt:3: the value");
}

TEST(KfdProperties, RejectsRepeatedKey) {
  expect_parse_error("simd_count 0\ncpu_cores_count 48\nsimd_count 4\n", "props.txt:3: key 'simd_count'");
}

}  // namespace
}  // namespace umem::hsa
