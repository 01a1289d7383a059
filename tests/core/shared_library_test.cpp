// The one loader of vendor runtimes (shared_library.hpp): open_first_library maps a candidate,
// find_loaded_library only takes one the process already has and never maps a file.
#include "umem/core/shared_library.hpp"

#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cstddef>

#include <string>
#include <vector>

#include "umem/core/error.hpp"

namespace {

bool is_mapped(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

TEST(FindLoadedLibrary, TakesALibraryThatIsAlreadyLoaded) {
  const std::vector<std::string> candidates{"/nonexistent/libnothing.so", "libc.so.6"};
  std::string tried;
  auto lib = umem::find_loaded_library(candidates, &tried);
  ASSERT_TRUE(lib.has_value());
  EXPECT_EQ(lib->path, "libc.so.6");
  EXPECT_TRUE(lib->mapped_path.find("libc.so.6") != std::string::npos) << lib->mapped_path;
  EXPECT_TRUE(tried.find("/nonexistent/libnothing.so") != std::string::npos) << tried;
  dlclose(lib->handle);
}

TEST(FindLoadedLibrary, NeverMapsALibraryThatIsNotLoaded) {
  if (is_mapped(UMEM_HIP_DOUBLE_PATH)) GTEST_SKIP() << "the test library is mapped already";
  const std::vector<std::string> candidates{UMEM_HIP_DOUBLE_PATH};
  std::string tried;
  EXPECT_FALSE(umem::find_loaded_library(candidates, &tried).has_value());
  EXPECT_EQ(tried, std::string("\n  ") + UMEM_HIP_DOUBLE_PATH + ": not loaded in this process");
  EXPECT_FALSE(is_mapped(UMEM_HIP_DOUBLE_PATH));
  // The same file is loadable: it was the NOLOAD mode, not the file, that kept it out.
  auto opened = umem::open_first_library(candidates, "the test library", "");
  EXPECT_TRUE(is_mapped(UMEM_HIP_DOUBLE_PATH));
  EXPECT_EQ(opened.mapped_path, UMEM_HIP_DOUBLE_PATH);
  dlclose(opened.handle);
}

TEST(OpenFirstLibrary, ListsEveryCandidateItTried) {
  const std::vector<std::string> candidates{"/nonexistent/a.so", "/nonexistent/b.so"};
  try {
    (void)umem::open_first_library(candidates, "the thing", "Install it.");
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_unavailable);
    const std::string m = e.what();
    EXPECT_TRUE(m.starts_with("cannot load the thing; tried:\n  /nonexistent/a.so: ")) << m;
    EXPECT_NE(m.find("\n  /nonexistent/b.so: "), std::string::npos) << m;
    EXPECT_TRUE(m.ends_with("\nInstall it.")) << m;
  }
}

TEST(LibraryReference, FindsSymbolsAndNamesAMissingRequiredOne) {
  auto found = umem::find_loaded_library(std::vector<std::string>{"libc.so.6"});
  ASSERT_TRUE(found.has_value());
  const umem::library_reference lib(*std::move(found));
  using umem::symbol_need;
  void* (*malloc_fn)(std::size_t) = nullptr;
  EXPECT_TRUE(lib.resolve({"malloc", symbol_need::required}, malloc_fn, "libc", ""));
  EXPECT_NE(malloc_fn, nullptr);
  void (*absent)() = nullptr;
  EXPECT_FALSE(lib.resolve({"umem_no_such_symbol", symbol_need::optional}, absent, "libc", ""));
  EXPECT_EQ(absent, nullptr);  // left as it was
  try {
    (void)lib.resolve({"umem_no_such_symbol", symbol_need::required}, absent, "the C library",
                      "use another one");
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_error);
    EXPECT_EQ(std::string(e.what()), "the C library " + lib.mapped_path() +
                                         " lacks the required symbol umem_no_such_symbol; use "
                                         "another one");
  }
}

}  // namespace
