// Locating real machine captures for tests. A test whose capture is absent skips with a message
// naming the file it needs; it never passes or fails silently.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace umem::test {

// Directory of ../shared/fixtures/machines (UMEM_FIXTURES_DIR overrides).
std::filesystem::path fixtures_dir();
// Directory of captures bundled in the repository (data/machines).
std::filesystem::path bundled_dir();
// Whole file contents.
std::string read_text(const std::filesystem::path& p);

}  // namespace umem::test

// Sets `var` to the fixture's path or skips the test naming the missing file.
#define UMEM_REQUIRE_FIXTURE(var, name)                                                 \
  const std::filesystem::path var = ::umem::test::fixtures_dir() / (name);              \
  if (!std::filesystem::exists(var))                                                    \
  GTEST_SKIP() << "needs the real capture " << var.string()                             \
               << " (set UMEM_FIXTURES_DIR to the folder of shared/fixtures/machines)"
