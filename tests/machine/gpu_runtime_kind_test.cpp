// The runtime kinds and their names (gpu_runtime_kind.hpp): the names UMEM_GPU_BACKEND takes and
// topology::gpu_backend records, read back as kinds.
#include <gtest/gtest.h>

#include "umem/machine/gpu_runtime_kind.hpp"

namespace umem::machine {
namespace {

TEST(GpuRuntimeKind, NamesRoundTrip) {
  for (const auto k : {gpu_runtime_kind::rocr, gpu_runtime_kind::cuda, gpu_runtime_kind::none})
    EXPECT_EQ(gpu_runtime_kind_named(to_string(k)), k) << to_string(k);
  EXPECT_STREQ(to_string(gpu_runtime_kind::rocr), "rocr");
  EXPECT_STREQ(to_string(gpu_runtime_kind::cuda), "cuda");
  EXPECT_STREQ(to_string(gpu_runtime_kind::none), "none");
  EXPECT_EQ(gpu_runtime_kind_named("auto"), std::nullopt);
  EXPECT_EQ(gpu_runtime_kind_named("CUDA"), std::nullopt);
}

TEST(GpuRuntimeKind, TheSelectedRuntimeIsReadFromTheTopology) {
  topology t;
  EXPECT_EQ(selected_gpu_runtime(t), gpu_runtime_kind::none);  // nothing selected
  t.gpu_backend = {"rocr", "the ROCm runtime is available"};
  EXPECT_EQ(selected_gpu_runtime(t), gpu_runtime_kind::rocr);
  t.gpu_backend.name = "cuda";
  EXPECT_EQ(selected_gpu_runtime(t), gpu_runtime_kind::cuda);
}

}  // namespace
}  // namespace umem::machine
