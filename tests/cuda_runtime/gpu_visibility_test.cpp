// make_gpu_mapper's dispatch (gpu_visibility.hpp) on the runtimes selection gives, against the CUDA
// double: each runtime gets its own mapper.
#include <gtest/gtest.h>

#include "cuda_test_env.hpp"
#include "umem/allocator/gpu/cuda_gpu_mapper.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"

namespace umem::alloc {
namespace {

using machine::gpu_runtime_request;
using machine::select_gpu_runtime;
using test::scoped_env;

TEST(GpuVisibility, TheMapperIsTheSelectedRuntimesOwn) {
  test::cuda_double_machine served(test::h200_machine());
  scoped_env lib("UMEM_CUDA_DRIVER_LIB", UMEM_CUDA_DOUBLE_PATH);
  topology t;
  const auto b =
      select_gpu_runtime(t, gpu_runtime_request::cuda, nullptr, test::cuda_double_candidates());
  const auto m = make_gpu_mapper(*b, t);
  const auto* cuda = dynamic_cast<const cuda_gpu_mapper*>(m.get());
  ASSERT_NE(cuda, nullptr) << m->describe();
  EXPECT_TRUE(cuda->registers());
  topology n;
  const auto none =
      select_gpu_runtime(n, gpu_runtime_request::none, nullptr, test::cuda_double_candidates());
  const auto host_only = make_gpu_mapper(*none, n);
  EXPECT_TRUE(dynamic_cast<const no_gpu_mapper*>(host_only.get()) != nullptr);
  EXPECT_EQ(host_only->describe(), "no GPU runtime (UMEM_GPU_BACKEND=none): host NUMA memory only");
}

TEST(GpuVisibility, NoRuntimeHasNoDeviceMemory) {
  topology t;
  const auto none = machine::make_no_runtime("test");
  EXPECT_EQ(make_device_memory_source(*none, t, 0), nullptr);
}

}  // namespace
}  // namespace umem::alloc
