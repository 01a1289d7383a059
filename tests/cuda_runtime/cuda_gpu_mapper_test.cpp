// cuda_gpu_mapper through the CUDA double: registration flags, the pointer-equality check, the
// context it leaves current, pageable mode, and refusals.
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdlib>

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
    EXPECT_FALSE(m.pins_foreign());
    m.map(seg());
    m.unmap(seg());
    EXPECT_EQ(m.register_foreign(base_, 100), nullptr);  // the GPU uses it as it is
  }
  EXPECT_EQ(test::cuda_double_log(), "");
}

// Memory umem did not allocate (Note [Foreign registrations]): registered page-rounded for the
// aliases' life, at its host address, shared by aliases of the same pages.
TEST_F(CudaMapper, ForeignMemoryIsRegisteredForItsAliasesLife) {
  serve(test::h200_machine());
  cuda_gpu_mapper m(drv_, topo_);
  EXPECT_TRUE(m.pins_foreign());
  auto* bytes = static_cast<unsigned char*>(base_);
  auto first = m.register_foreign(bytes + 100, 5000);  // pages 0 and 1
  ASSERT_NE(first, nullptr);
  auto second = m.register_foreign(bytes + 4096, 16);  // the same pages
  EXPECT_EQ(current(), nullptr);
  first.reset();
  EXPECT_EQ(test::cuda_double_registrations(), 1);
  second.reset();
  EXPECT_EQ(test::cuda_double_registrations(), 0);
  EXPECT_EQ(test::cuda_double_log(),
            "retain 0\nregister r1 8192 0x3\ndevice_pointer r1\nunregister r1\n");
}

// What the driver cannot pin (cuMemHostRegister in the double: as an H100 answered) is refused as
// unsupported, so the caller copies, and nothing stays registered.
TEST_F(CudaMapper, ForeignPagesTheDriverCannotPinAreUnsupported) {
  serve(test::h200_machine());
  cuda_gpu_mapper m(drv_, topo_);
  auto* bytes = static_cast<unsigned char*>(base_);
  ASSERT_EQ(mprotect(bytes, 4096, PROT_READ), 0);
  try {
    (void)m.register_foreign(bytes + 64, 64);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_INVALID_VALUE"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("pins only writable memory"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(test::cuda_double_registrations(), 0);
  ASSERT_EQ(mprotect(bytes, 4096, PROT_READ | PROT_WRITE), 0);
  // Pages someone else registered: refused before any registration of ours.
  m.map(segment{bytes + 8192, 4096, {bind_mode::bind, {0}}, coherence::fine});
  try {
    (void)m.register_foreign(bytes + 4096, 8192);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("only in part"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.register_foreign(bytes + 8192, 100), nullptr);  // known wholly: nothing needed
  EXPECT_EQ(test::cuda_double_registrations(), 1);
}

// The double's cuMemHostRegister pins what the driver pins: each case as an H100 answered it
// (the rules and their sources: cuMemHostRegister in tests/cuda_double/cuda_double.cpp).
TEST_F(CudaMapper, TheDoubleRefusesWhatTheDriverCannotPin) {
  serve(test::h200_machine());
  namespace res = cuda::cuda_compat::result;
  cuda::cu_context ctx = nullptr;
  drv_->check(drv_->fn().cuDevicePrimaryCtxRetain(&ctx, 0), "retain");
  drv_->check(drv_->fn().cuCtxSetCurrent(ctx), "set");
  const auto& fn = drv_->fn();
  constexpr unsigned flags = 3;  // PORTABLE | DEVICEMAP
  auto* bytes = static_cast<unsigned char*>(base_);
  ASSERT_EQ(mprotect(bytes, 4096, PROT_READ), 0);
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes, 8192, flags), res::invalid_value);  // read-only page
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes, 4096, flags | 0x08), res::success);  // READ_ONLY flag
  EXPECT_EQ(fn.cuMemHostUnregister(bytes), res::success);
  ASSERT_EQ(munmap(bytes + 3 * 4096, 4096), 0);  // a hole
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes + 2 * 4096, 3 * 4096, flags), res::invalid_value);
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes + 4096 + 8, 100, flags), res::success);
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes + 4096 + 200, 100, flags), res::success);  // same page
  EXPECT_EQ(fn.cuMemHostRegister_v2(bytes + 4096 + 50, 100, flags),
            res::host_memory_already_registered);  // overlapping bytes
  EXPECT_EQ(fn.cuMemHostUnregister(bytes + 4096 + 9), res::invalid_value);  // inside one
  EXPECT_EQ(fn.cuMemHostUnregister(bytes + 4096 + 8), res::success);
  EXPECT_EQ(fn.cuMemHostUnregister(bytes + 4096 + 200), res::success);
  EXPECT_EQ(fn.cuMemHostUnregister(bytes + 4096 + 8), res::host_memory_not_registered);
  // A shared map of a file: refused outside tmpfs (the build folder, unless it is on tmpfs).
  char path[] = "umem-cuda-double-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  void* file = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(file, MAP_FAILED);
  struct statfs fs {};
  ASSERT_EQ(fstatfs(fd, &fs), 0);
  const bool tmpfs = fs.f_type == 0x01021994;
  EXPECT_EQ(fn.cuMemHostRegister_v2(file, 4096, flags), tmpfs ? res::success : res::invalid_value);
  if (tmpfs) {
    EXPECT_EQ(fn.cuMemHostUnregister(file), res::success);
  }
  munmap(file, 4096);
  close(fd);
  mmap(bytes + 3 * 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
       -1, 0);  // back, for TearDown's munmap
  drv_->check(fn.cuCtxSetCurrent(nullptr), "unset");
  drv_->check(fn.cuDevicePrimaryCtxRelease_v2(0), "release");
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
