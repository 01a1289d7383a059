// The dlopen'd ROCr function table: search order, errors naming what was tried, optional
// symbols as capabilities, status checking and the hsa_init session.
#include "umem/hsa_runtime/rocr_library.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rocr_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

namespace {

using umem::hsa::rocr_library;
using umem::hsa::rocr_session;
using umem::test::scoped_env;
namespace rc = umem::hsa::rocr_compat;

std::vector<std::string> optional_symbols() {
  std::vector<std::string> out;
  for (const auto& s : umem::hsa::rocr_symbols())
    if (s.need == umem::symbol_need::optional) out.emplace_back(s.name);
  return out;
}

TEST(RocrLibrary, DefaultCandidatesFollowTheDocumentedOrder) {
  scoped_env lib("UMEM_HSA_RUNTIME_LIB", "/custom/libhsa-runtime64.so.1");
  scoped_env rocm("ROCM_PATH", "/site/rocm-7.1/");
  EXPECT_EQ(rocr_library::default_candidates(),
            (std::vector<std::string>{
                "/custom/libhsa-runtime64.so.1", "/site/rocm-7.1/lib/libhsa-runtime64.so.1",
                "/opt/rocm/lib/libhsa-runtime64.so.1", "libhsa-runtime64.so.1"}));
}

TEST(RocrLibrary, DefaultCandidatesDropDuplicatesAndUnsetOptions) {
  scoped_env lib("UMEM_HSA_RUNTIME_LIB", std::nullopt);
  scoped_env rocm("ROCM_PATH", "/opt/rocm");
  EXPECT_EQ(
      rocr_library::default_candidates(),
      (std::vector<std::string>{"/opt/rocm/lib/libhsa-runtime64.so.1", "libhsa-runtime64.so.1"}));
}

TEST(RocrLibrary, NothingLoadableListsEveryPathTriedWithDlerror) {
  const std::vector<std::string> candidates{"/nonexistent/a/libhsa-runtime64.so.1",
                                            "/nonexistent/b/libhsa-runtime64.so.1"};
  try {
    rocr_library::load_from(candidates);
    FAIL() << "loading only missing files must fail";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_unavailable);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("/nonexistent/a/libhsa-runtime64.so.1: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("/nonexistent/b/libhsa-runtime64.so.1: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("UMEM_HSA_RUNTIME_LIB"), std::string::npos) << msg;
  }
}

TEST(RocrLibrary, FirstCandidateThatLoadsWins) {
  const std::vector<std::string> candidates{"/nonexistent/libhsa-runtime64.so.1",
                                            UMEM_ROCR_DOUBLE_PATH, UMEM_ROCR_DOUBLE_523_PATH};
  const auto lib = rocr_library::load_from(candidates);
  EXPECT_EQ(lib.path(), UMEM_ROCR_DOUBLE_PATH);
  EXPECT_TRUE(lib.has_vmem());
}

TEST(RocrLibrary, MissingRequiredSymbolNamesSymbolAndLibrary) {
  // libm loads but is no HSA runtime: the first required symbol of the table is missing.
  try {
    rocr_library::load_from(std::vector<std::string>{"libm.so.6"});
    FAIL() << "libm is not a ROCr runtime";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_error);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("required symbol hsa_init"), std::string::npos) << msg;
    EXPECT_NE(msg.find("libm"), std::string::npos) << msg;
  }
}

TEST(RocrLibrary, OptionalSymbolsBecomeCapabilities) {
  const auto full = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH});
  EXPECT_TRUE(full.has_vmem());
  EXPECT_TRUE(full.has_dmabuf());
  EXPECT_TRUE(full.missing_optional().empty());
  EXPECT_NE(full.fn().hsa_amd_vmem_map, nullptr);

  const auto old = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_523_PATH});
  EXPECT_FALSE(old.has_vmem());
  EXPECT_FALSE(old.has_dmabuf());
  EXPECT_EQ(old.missing_optional(), optional_symbols());
  EXPECT_EQ(old.fn().hsa_amd_vmem_map, nullptr);
  EXPECT_NE(old.fn().hsa_amd_svm_attributes_set, nullptr);  // required, present since <= 5.2.3
}

TEST(RocrLibrary, DebianRuntimeLacksVmemAndDmabuf) {
  // docs/rocm-runtime.md §5: in Debian's 5.2.3 .so hsa_amd_vmem_* and dmabuf export are absent.
  const std::string debian = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";
  if (!std::filesystem::exists(debian)) GTEST_SKIP() << "needs Debian's " << debian;
  const auto lib = rocr_library::load_from(std::vector<std::string>{debian});
  EXPECT_FALSE(lib.has_vmem());
  EXPECT_FALSE(lib.has_dmabuf());
  EXPECT_EQ(lib.missing_optional(), optional_symbols());
}

TEST(RocrLibrary, CheckCarriesSymbolAndRuntimeText) {
  const auto lib = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH});
  EXPECT_NO_THROW(lib.check(rc::status::success, "hsa_init"));
  EXPECT_NO_THROW(lib.check(rc::status::info_break, "hsa_iterate_agents"));
  try {
    lib.check(rc::status::invalid_argument, "hsa_agent_get_info");
    FAIL() << "INVALID_ARGUMENT must throw";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_error);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hsa_agent_get_info failed: 0x1001 HSA_STATUS_ERROR_INVALID_ARGUMENT"),
              std::string::npos)
        << msg;
  }
}

TEST(RocrSession, NoDriverIsRuntimeUnavailable) {
  scoped_env snapshot("UMEM_ROCR_DOUBLE_SNAPSHOT", std::nullopt);
  const auto lib = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH});
  try {
    rocr_session session(lib);
    FAIL() << "hsa_init must fail without a driver";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_unavailable);
    EXPECT_NE(std::string(e.what()).find("0x1008"), std::string::npos) << e.what();
  }
  umem::hsa::rocr_status status = rc::status::success;
  EXPECT_FALSE(rocr_session::try_open(lib, status).has_value());
  EXPECT_EQ(status, rc::status::out_of_resources);
}

TEST(RocrSession, PairsInitWithShutDown) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  umem::test::temp_dir dir;
  const auto file = umem::test::write_snapshot(dir, umem::test::import_capture(capture));
  scoped_env snapshot("UMEM_ROCR_DOUBLE_SNAPSHOT", file.string());
  scoped_env version("UMEM_ROCR_DOUBLE_VERSION", "7.1");
  const auto lib = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH});
  umem::test::double_reset(UMEM_ROCR_DOUBLE_PATH);
  {
    rocr_session outer(lib);
    auto moved = std::move(outer);  // the moved-from session must not shut down
    rocr_session inner(lib);
  }
  const std::string log = umem::test::double_call_log(UMEM_ROCR_DOUBLE_PATH);
  EXPECT_NE(log.find("hsa_init -> SUCCESS release=7.1 agents=8"), std::string::npos) << log;
  EXPECT_NE(log.find("hsa_init -> SUCCESS refcount=2"), std::string::npos) << log;
  EXPECT_NE(log.find("hsa_shut_down -> SUCCESS refcount=1"), std::string::npos) << log;
  EXPECT_NE(log.find("hsa_shut_down -> SUCCESS refcount=0"), std::string::npos) << log;
  EXPECT_EQ(log.find("NOT_INITIALIZED"), std::string::npos) << log;
}

}  // namespace
