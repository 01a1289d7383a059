// Expected outputs kept as files beside the tests, compared byte for byte.
//
// Note [Golden update switch]
// UMEM_UPDATE_GOLDEN=1 (a test-only variable) rewrites the golden file from the current output
// and fails the test, so an update is always deliberate and never passes silently; review the
// diff against the captures before committing it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/fixtures.hpp"

namespace umem::test {

inline void expect_golden(const std::string& actual, const std::filesystem::path& path) {
  const char* update = std::getenv("UMEM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    FAIL() << "rewrote " << path << " (UMEM_UPDATE_GOLDEN=1): review it, then run again without the switch";
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run once with UMEM_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, read_text(path)) << "output differs from " << path
                                     << "; if the change is intended, rerun with UMEM_UPDATE_GOLDEN=1";
}

}  // namespace umem::test
