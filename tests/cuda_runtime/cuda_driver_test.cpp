// The CUDA driver loader (cuda_driver.hpp): candidate paths, the override, the symbol table and
// error texts, through the CUDA double loaded like libcuda.so.1.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuda_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::cuda {
namespace {

using test::scoped_env;

TEST(CudaDriver, TheOverrideIsTriedFirstThenTheSoname) {
  scoped_env lib("UMEM_CUDA_DRIVER_LIB", UMEM_CUDA_DOUBLE_PATH);
  EXPECT_EQ(cuda_driver::default_candidates(),
            (std::vector<std::string>{UMEM_CUDA_DOUBLE_PATH, "libcuda.so.1"}));
  const cuda_driver drv = cuda_driver::load();
  EXPECT_EQ(drv.path(), UMEM_CUDA_DOUBLE_PATH);
  EXPECT_NE(drv.resolved_path().find("umem_cuda_double"), std::string::npos);
}

TEST(CudaDriver, UnsetOverrideLeavesTheSoname) {
  scoped_env lib("UMEM_CUDA_DRIVER_LIB", std::nullopt);
  EXPECT_EQ(cuda_driver::default_candidates(), std::vector<std::string>{"libcuda.so.1"});
}

TEST(CudaDriver, NothingLoadableListsEveryPathTried) {
  const std::vector<std::string> c{"/nonexistent/a/libcuda.so.1", "/nonexistent/b/libcuda.so.1"};
  try {
    (void)cuda_driver::load_from(c);
    FAIL() << "loaded a nonexistent library";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_unavailable);
    const std::string m = e.what();
    EXPECT_NE(m.find("/nonexistent/a/libcuda.so.1"), std::string::npos) << m;
    EXPECT_NE(m.find("/nonexistent/b/libcuda.so.1"), std::string::npos) << m;
    EXPECT_NE(m.find("UMEM_CUDA_DRIVER_LIB"), std::string::npos) << m;
  }
}

TEST(CudaDriver, ALibraryWithoutTheDriverSymbolsIsRefusedByName) {
  // The ROCr double is a real shared library that exports no cu* symbol.
  const std::vector<std::string> c{UMEM_ROCR_DOUBLE_PATH};
  try {
    (void)cuda_driver::load_from(c);
    FAIL() << "accepted a library without cuInit";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_NE(std::string(e.what()).find("lacks the required symbol cuInit"), std::string::npos)
        << e.what();
  }
}

TEST(CudaDriver, TheTableNamesTheVersionedEntryPoints) {
  const auto symbols = cuda_symbols();
  const auto has = [&](const char* name, symbol_need need) {
    return std::any_of(symbols.begin(), symbols.end(), [&](const runtime_symbol& s) {
      return std::string(s.name) == name && s.need == need;
    });
  };
  EXPECT_TRUE(has("cuMemHostRegister_v2", symbol_need::required));
  EXPECT_TRUE(has("cuMemHostGetDevicePointer_v2", symbol_need::required));
  EXPECT_TRUE(has("cuDevicePrimaryCtxRelease_v2", symbol_need::required));
  EXPECT_TRUE(has("cuEventDestroy_v2", symbol_need::required));
  EXPECT_TRUE(has("cuDeviceGetUuid_v2", symbol_need::optional));
  EXPECT_TRUE(has("cuMemAlloc_v2", symbol_need::required));
  EXPECT_TRUE(has("cuMemFree_v2", symbol_need::required));
  EXPECT_TRUE(has("cuThreadExchangeStreamCaptureMode", symbol_need::optional));
  EXPECT_FALSE(has("cuMemAllocManaged", symbol_need::required));  // never managed memory
  const cuda_driver drv = cuda_driver::load_from(test::cuda_double_candidates());
  EXPECT_NE(drv.fn().cuDeviceGetUuid_v2, nullptr);
}

TEST(CudaDriver, TheVirtualMemoryApiIsOptional) {
  const auto symbols = cuda_symbols();
  for (const char* name : {"cuMemGetAllocationGranularity", "cuMemAddressReserve",
                           "cuMemAddressFree", "cuMemCreate", "cuMemRelease", "cuMemMap",
                           "cuMemUnmap", "cuMemSetAccess"})
    EXPECT_TRUE(std::any_of(symbols.begin(), symbols.end(), [&](const runtime_symbol& s) {
      return std::string(s.name) == name && s.need == symbol_need::optional;
    })) << name;
  EXPECT_TRUE(cuda_driver::load_from(test::cuda_double_candidates()).has_virtual_memory());
  const cuda_driver old = cuda_driver::load_from(test::cuda_double_no_vmm_candidates());
  EXPECT_FALSE(old.has_virtual_memory());
  EXPECT_EQ(old.fn().cuMemMap, nullptr);
  EXPECT_NE(old.fn().cuCtxSynchronize, nullptr);  // required: every driver has it
}

TEST(CudaDriver, TheStreamCaptureModeIsExchangedPerThread) {
  const cuda_driver drv = cuda_driver::load_from(test::cuda_double_candidates());
  ASSERT_NE(drv.fn().cuThreadExchangeStreamCaptureMode, nullptr);
  int mode = cuda_compat::stream_capture_mode::relaxed;
  drv.check(drv.fn().cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
  EXPECT_EQ(mode, cuda_compat::stream_capture_mode::global);  // the driver's default
  drv.check(drv.fn().cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode");
  EXPECT_EQ(mode, cuda_compat::stream_capture_mode::relaxed);  // restored
}

TEST(CudaDriver, ResultTextsComeFromTheDriver) {
  const cuda_driver drv = cuda_driver::load_from(test::cuda_double_candidates());
  EXPECT_EQ(drv.result_text(100), "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
  EXPECT_EQ(drv.result_text(12345), "CUresult 12345");
  EXPECT_NO_THROW(drv.check(0, "cuInit"));
  try {
    drv.check(201, "cuCtxSetCurrent");
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_EQ(std::string(e.what()).find("cuCtxSetCurrent failed: CUDA_ERROR_INVALID_CONTEXT"), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace umem::cuda
