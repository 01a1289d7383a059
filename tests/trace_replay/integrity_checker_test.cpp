#include "integrity_checker.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace tr = umem::trace_replay;

TEST(integrity_checker, intact_blocks_pass) {
  std::vector<unsigned char> mem(1 << 20);
  tr::integrity_checker c(2, 4096);
  c.on_alloc(0, mem.data(), 100000, 1);
  c.on_alloc(1, mem.data() + 100000, 5, 2);  // smaller than the 64-byte edges
  EXPECT_EQ(c.on_free(1, 3), mem.data() + 100000);
  c.on_free(0, 4);
  EXPECT_EQ(c.failures(), 0u);
  EXPECT_EQ(c.blocks_checked(), 2u);
}

TEST(integrity_checker, a_changed_byte_is_a_failure_naming_the_block_and_line) {
  std::vector<unsigned char> mem(1 << 20);
  tr::integrity_checker c(1, 4096);
  c.on_alloc(0, mem.data(), 1000, 1);
  mem[999] ^= 0xff;  // the last byte is in the tail pattern
  c.on_free(0, 7);
  ASSERT_EQ(c.failures(), 1u);
  EXPECT_NE(c.messages().at(0).find("line 7: block 0"), std::string::npos);
  EXPECT_NE(c.messages().at(0).find("the first at offset 999"), std::string::npos);
}

TEST(integrity_checker, overlapping_live_blocks_are_a_failure) {
  std::vector<unsigned char> mem(1 << 20);
  tr::integrity_checker c(2, 1 << 16);
  c.on_alloc(0, mem.data(), 300000, 1);
  c.on_alloc(1, mem.data() + 200000, 256, 2);  // inside block 0, away from its sampled bytes
  ASSERT_GE(c.failures(), 1u);
  EXPECT_NE(c.messages().at(0).find("line 2: block 1"), std::string::npos);
  EXPECT_NE(c.messages().at(0).find("overlaps live block 0"), std::string::npos);
}

TEST(integrity_checker, stale_bytes_of_the_last_pass_do_not_verify) {
  std::vector<unsigned char> mem(4096);
  tr::integrity_checker c(1, 4096);
  c.begin_pass(1);
  c.on_alloc(0, mem.data(), 64, 1);
  const std::vector<unsigned char> pass1(mem.begin(), mem.begin() + 64);
  c.on_free(0, 2);
  c.begin_pass(2);
  c.on_alloc(0, mem.data(), 64, 1);
  EXPECT_NE(std::vector<unsigned char>(mem.begin(), mem.begin() + 64), pass1);
  c.on_free(0, 2);
  EXPECT_EQ(c.failures(), 0u);
}
