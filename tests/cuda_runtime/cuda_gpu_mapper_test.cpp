// cuda_gpu_mapper through the CUDA double: registration flags, the pointer-equality check, the
// context it leaves current, pageable mode, and refusals.
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <memory>

#include "cuda_test_env.hpp"
#include "umem/allocator/gpu/cuda_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_discovery.hpp"

namespace umem::alloc {
namespace {

using test::scoped_env;

constexpr std::size_t kSize = 4u << 20;

class CudaMapper : public ::testing::Test {
 protected:
  // The double serves `machine`; topo_ is discovered from it, as live_machine does.
  void serve(const topology& machine) {
    served_ = std::make_unique<test::cuda_double_machine>(machine);
    drv_ = std::make_shared<const cuda::cuda_driver>(
        cuda::cuda_driver::load_from(test::cuda_double_candidates()));
    topo_ = {};
    cuda::discover_cuda(topo_, *drv_);
  }
  void SetUp() override {
    base_ = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(base_, MAP_FAILED);
  }
  void TearDown() override { munmap(base_, kSize); }
  segment seg() const { return segment{base_, kSize, {bind_mode::bind, {0}}, coherence::fine}; }
  cuda::cu_context current() const { return test::current_context(*drv_); }

  std::unique_ptr<test::cuda_double_machine> served_;
  std::shared_ptr<const cuda::cuda_driver> drv_;
  topology topo_;
  void* base_ = nullptr;
};

TEST_F(CudaMapper, RegistersPortableDeviceMappedAtTheHostAddress) {
  serve(test::h200_machine());
  {
    cuda_gpu_mapper m(drv_, topo_);
    EXPECT_TRUE(m.registers());
    EXPECT_TRUE(m.gpu_accessible());
    EXPECT_EQ(m.describe().find("no PAGEABLE_MEMORY_ACCESS: segments are registered"), 0u)
        << m.describe();
    m.map(seg());
    EXPECT_EQ(current(), nullptr) << "map() must restore the thread's (empty) context";
    m.unmap(seg());
    EXPECT_EQ(test::cuda_double_retains(0), 1);
  }
  // 0x3 = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP.
  EXPECT_EQ(test::cuda_double_log(), "retain 0\nregister r1 4194304 0x3\ndevice_pointer r1\n"
                                     "unregister r1\nrelease 0\n");
  EXPECT_EQ(test::cuda_double_retains(0), 0);
}

TEST_F(CudaMapper, KeepsTheCallersCurrentContext) {
  serve(test::h200_machine());
  cuda::cu_context theirs = nullptr;
  drv_->check(drv_->fn().cuDevicePrimaryCtxRetain(&theirs, 0), "retain");
  drv_->check(drv_->fn().cuCtxSetCurrent(theirs), "set");
  cuda_gpu_mapper m(drv_, topo_);
  m.map(seg());
  EXPECT_EQ(current(), theirs);
  m.unmap(seg());
  EXPECT_EQ(current(), theirs);
  drv_->check(drv_->fn().cuCtxSetCurrent(nullptr), "unset");
  drv_->check(drv_->fn().cuDevicePrimaryCtxRelease_v2(0), "release");
}

TEST_F(CudaMapper, AnotherDeviceAddressIsRefusedAndUndone) {
  serve(test::h200_machine());
  cuda_gpu_mapper m(drv_, topo_);
  {
    scoped_env offset("UMEM_CUDA_DOUBLE_DEVICE_POINTER_OFFSET", "0x1000");
    try {
      m.map(seg());
      FAIL() << "accepted a device address other than the host address";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), errc::unsupported);
      EXPECT_NE(std::string(e.what()).find("The registration was undone."), std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(test::cuda_double_log(),
            "retain 0\nregister r1 4194304 0x3\ndevice_pointer r1\nunregister r1\n");
  EXPECT_NO_THROW(m.map(seg()));  // nothing was left registered
  m.unmap(seg());
}

TEST_F(CudaMapper, ARegistrationTheDriverRefusesNamesTheCall) {
  serve(test::h200_machine());
  cuda_gpu_mapper m(drv_, topo_);
  m.map(seg());
  try {
    m.map(seg());
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_NE(std::string(e.what()).find(
                  "cuMemHostRegister failed: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
              std::string::npos)
        << e.what();
  }
  m.unmap(seg());
  m.unmap(seg());  // logged, not thrown
}

TEST_F(CudaMapper, ARegistrationWithoutMemoryIsOutOfMemory) {
  serve(test::h200_machine());
  cuda_gpu_mapper m(drv_, topo_);
  test::cuda_double_fail_next("cuMemHostRegister", cuda::cuda_compat::result::out_of_memory);
  try {
    m.map(seg());
    FAIL() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("cuMemHostRegister failed: CUDA_ERROR_OUT_OF_MEMORY"),
              std::string::npos)
        << e.what();
  }
  m.map(seg());
  m.unmap(seg());
}

TEST_F(CudaMapper, PageableMemoryAccessNeedsNoRegistration) {
  topology machine = test::h200_machine();
  machine.agents[0].cuda->pageable_memory_access = true;  // HMM, or Grace Hopper
  machine.agents[0].coherent_host_access = true;
  serve(machine);
  {
    cuda_gpu_mapper m(drv_, topo_);
    EXPECT_FALSE(m.registers());
    EXPECT_TRUE(m.gpu_accessible());
    m.map(seg());
    m.unmap(seg());
  }
  EXPECT_EQ(test::cuda_double_log(), "");
}

TEST_F(CudaMapper, AGpuThatCannotMapHostMemoryIsUnsupported) {
  topology machine = test::h200_machine();
  machine.agents[0].cuda->can_map_host_memory = false;
  serve(machine);
  try {
    cuda_gpu_mapper m(drv_, topo_);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("CUDA device 0 (NVIDIA H200)"), std::string::npos)
        << e.what();
  }
}

TEST_F(CudaMapper, MisuseIsRefused) {
  serve(test::h200_machine());
  EXPECT_THROW(cuda_gpu_mapper(drv_, topology{}), umem::error);  // no CUDA GPU in the model
  cuda_gpu_mapper m(drv_, topo_);
  segment empty = seg();
  empty.size = 0;
  try {
    m.map(empty);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

}  // namespace
}  // namespace umem::alloc
