// The HIP table (hip_runtime.hpp): taken only from a library the process has already mapped,
// never mapping one itself; checked on the HIP double (tests/hip_double). ctest runs every test
// in its own process, so "not loaded yet" holds where a test needs it (checked, else skipped).
#include "umem/hip_runtime/hip_runtime.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hip_runtime/hip_test_env.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/hip_runtime/hip_device_scope.hpp"

namespace {

using umem::errc;
using umem::hip::hip_runtime;
using umem::test::mapped_hip_double;
using umem::test::scoped_env;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool maps_hip(const std::vector<std::string>& objects) {
  return std::any_of(objects.begin(), objects.end(), [](const std::string& o) {
    return contains(o, "libamdhip64") || contains(o, "umem_hip_double");
  });
}

TEST(HipRuntime, DefaultCandidatesAreTheOptionThenRocmSonames) {
  scoped_env lib("UMEM_HIP_RUNTIME_LIB", "/opt/x/libamdhip64.so.6");
  EXPECT_EQ(hip_runtime::default_candidates(),
            (std::vector<std::string>{"/opt/x/libamdhip64.so.6", "libamdhip64.so",
                                      "libamdhip64.so.6", "libamdhip64.so.7", "libamdhip64.so.5"}));
  scoped_env unset("UMEM_HIP_RUNTIME_LIB", std::nullopt);
  EXPECT_EQ(hip_runtime::default_candidates().size(), 4u);
}

TEST(HipRuntime, NotLoadedIsAPlainStateAndMapsNothing) {
  if (umem::test::is_mapped(UMEM_HIP_DOUBLE_PATH))
    GTEST_SKIP() << "another test of this process mapped the double (run under ctest)";
  const auto before = umem::test::mapped_objects();
  ASSERT_FALSE(maps_hip(before));
  // Named explicitly, as a real path that exists: still not mapped by the attempt.
  scoped_env lib("UMEM_HIP_RUNTIME_LIB", UMEM_HIP_DOUBLE_PATH);
  EXPECT_FALSE(hip_runtime::find_loaded().has_value());
  const auto after = umem::test::mapped_objects();
  EXPECT_EQ(after, before);
  EXPECT_FALSE(maps_hip(after));
  EXPECT_FALSE(umem::test::is_mapped(UMEM_HIP_DOUBLE_PATH));
}

TEST(HipRuntime, MappedByTheProcessTheTableLoadsEverySymbol) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  scoped_env lib("UMEM_HIP_RUNTIME_LIB", UMEM_HIP_DOUBLE_PATH);
  auto rt = hip_runtime::find_loaded();
  ASSERT_TRUE(rt.has_value());
  EXPECT_EQ(rt->path(), UMEM_HIP_DOUBLE_PATH);
  EXPECT_TRUE(rt->resolved_path().ends_with("libumem_hip_double.so")) << rt->resolved_path();
  // Every entry is the double's own export, the one ld.so resolves for the name.
  ASSERT_EQ(umem::hip::hip_symbols().size(), 13u);
  for (const auto& sym : umem::hip::hip_symbols())
    EXPECT_EQ(sym.need, umem::symbol_need::required) << sym.name;
#define UMEM_HIP_EXPECT(symbol, need, result, params) \
  EXPECT_EQ(reinterpret_cast<void*>(rt->fn().symbol), dbl.get<void*>(#symbol)) << #symbol;
  UMEM_HIP_SYMBOLS(UMEM_HIP_EXPECT)
#undef UMEM_HIP_EXPECT
}

TEST(HipRuntime, FoundBySonameToo) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  scoped_env lib("UMEM_HIP_RUNTIME_LIB", "libumem_hip_double.so");  // the double's DT_SONAME
  auto rt = hip_runtime::find_loaded();
  ASSERT_TRUE(rt.has_value());
  EXPECT_EQ(rt->path(), "libumem_hip_double.so");
  EXPECT_TRUE(rt->resolved_path().ends_with("/libumem_hip_double.so")) << rt->resolved_path();
}

TEST(HipRuntime, TheLibraryOutlivesTheTable) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  { auto rt = hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PATH}); }
  EXPECT_TRUE(umem::test::is_mapped(UMEM_HIP_DOUBLE_PATH));  // the owner's reference remains
}

TEST(HipRuntime, MissingRequiredSymbolNamesTheSymbolAndTheLibrary) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PARTIAL_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  try {
    (void)hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PARTIAL_PATH});
    FAIL() << "a HIP without hipEventSynchronize loaded";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_TRUE(contains(e.what(), "lacks the required symbol hipEventSynchronize")) << e.what();
    EXPECT_TRUE(contains(e.what(), UMEM_HIP_DOUBLE_PARTIAL_PATH)) << e.what();
  }
}

TEST(HipRuntime, ResultsReadAsHipNamesThem) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  auto rt = hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PATH});
  ASSERT_TRUE(rt.has_value());
  // The double's table: 600 hipErrorNotReady "device not ready"; unknown codes read as 999's.
  EXPECT_EQ(rt->result_text(600), "hipErrorNotReady (device not ready)");
  EXPECT_EQ(rt->result_text(12345), "hipErrorUnknown (unknown error)");
  EXPECT_NO_THROW(rt->check(0, "hipEventQuery"));
  try {
    rt->check(719, "hipEventQuery");
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_EQ(e.what(), umem::test::hip_double_launch_failure("hipEventQuery"));
  }
}

TEST(HipDeviceScope, SetsTheDeviceForTheScopeAndRestoresTheCallers) {
  const mapped_hip_double dbl(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(dbl.ok()) << dlerror();
  dbl.reset(4);
  auto rt = hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PATH});
  ASSERT_TRUE(rt.has_value());
  ASSERT_EQ(dbl.set_device(1), 0);
  {
    const umem::hip::hip_device_scope scope(*rt, 3);
    EXPECT_EQ(dbl.current_device(), 3);
  }
  EXPECT_EQ(dbl.current_device(), 1);
  {
    const umem::hip::hip_device_scope same(*rt, 1);  // already current: no hipSetDevice
  }
  EXPECT_EQ(dbl.calls("hipSetDevice"), 1 + 2);  // the test's own, then umem's set and restore
  try {
    const umem::hip::hip_device_scope scope(*rt, 4);  // the double has devices 0-3
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_TRUE(contains(e.what(), "hipSetDevice failed: hipErrorInvalidDevice")) << e.what();
  }
  EXPECT_EQ(dbl.current_device(), 1);
}

}  // namespace
