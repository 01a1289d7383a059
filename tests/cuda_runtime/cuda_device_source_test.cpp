// cuda_device_source through the CUDA double: device memory from cuMemAlloc in the primary
// context, 2 MiB granularity, cuMemFree, cuMemGetInfo, and out of device memory.
#include <gtest/gtest.h>

#include <memory>

#include "cuda_test_env.hpp"
#include "umem/allocator/gpu/cuda_device_source.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_discovery.hpp"

namespace umem::alloc {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t kBudget = 64 * MiB;  // the served H200's device memory in these tests

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class CudaDeviceSource : public ::testing::Test {
 protected:
  void SetUp() override {
    topology machine = test::h200_machine();
    machine.agents[0].cuda->total_memory_bytes = kBudget;
    served_ = std::make_unique<test::cuda_double_machine>(machine);
    drv_ = std::make_shared<const cuda::cuda_driver>(
        cuda::cuda_driver::load_from(test::cuda_double_candidates()));
    cuda::discover_cuda(topo_, *drv_);
    ASSERT_EQ(topo_.gpus().size(), 1u);
  }
  cuda::cu_context current() const { return test::current_context(*drv_); }

  std::unique_ptr<test::cuda_double_machine> served_;
  std::shared_ptr<const cuda::cuda_driver> drv_;
  topology topo_;
};

TEST_F(CudaDeviceSource, AllocatesWholeGranulesInThePrimaryContextAndFreesThem) {
  {
    cuda_device_source src(drv_, *topo_.gpus()[0]);
    const segment s = src.allocate(3 * MiB, {bind_mode::bind, {}}, coherence::coarse);
    EXPECT_EQ(s.size, 4 * MiB);  // 3 MiB rounded up to the 2 MiB granularity
    EXPECT_EQ(s.reserved_size, 0u);  // not growable
    EXPECT_EQ(current(), nullptr) << "allocate() must restore the thread's (empty) context";
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(4 * MiB));
    EXPECT_EQ(src.memory_info(), (std::pair<std::uint64_t, std::uint64_t>{60 * MiB, kBudget}));
    src.deallocate(s);
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
    EXPECT_TRUE(contains(src.describe(), "CUDA device 0 (NVIDIA H200) memory: cuMemAlloc"))
        << src.describe();
  }
  EXPECT_EQ(test::cuda_double_log(), "retain 0\nmem_alloc d1 4194304\nmem_free d1\nrelease 0\n");
  EXPECT_EQ(test::cuda_double_retains(0), 0);
}

TEST_F(CudaDeviceSource, OutOfDeviceMemoryIsOutOfMemoryWithTheDeviceAndWhatIsLeft) {
  cuda_device_source src(drv_, *topo_.gpus()[0]);
  const segment held = src.allocate(48 * MiB, {}, coherence::coarse);
  try {
    (void)src.allocate(32 * MiB, {}, coherence::coarse);
    FAIL() << "allocated past the device's memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "CUDA device 0 (NVIDIA H200) has no room for 33554432 bytes")) << m;
    EXPECT_TRUE(contains(m, "CUDA_ERROR_OUT_OF_MEMORY")) << m;
    EXPECT_TRUE(contains(m, "cuMemGetInfo: 16777216 of 67108864 bytes free")) << m;
  }
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(48 * MiB));
  src.deallocate(held);
}

TEST_F(CudaDeviceSource, MisuseIsRefused) {
  cuda_device_source src(drv_, *topo_.gpus()[0]);
  try {
    (void)src.allocate(0, {}, coherence::coarse);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  agent amd;
  amd.kind = agent_kind::gpu;
  amd.marketing_name = "AMD Instinct MI300A";
  try {
    cuda_device_source other(drv_, amd);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "AMD Instinct MI300A is not a GPU discovered through the CUDA"))
        << e.what();
  }
}

}  // namespace
}  // namespace umem::alloc
