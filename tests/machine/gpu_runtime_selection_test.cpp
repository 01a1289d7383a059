// The GPU runtime (gpu_runtime_selection.hpp): selection auto/rocr/cuda/none against the ROCr and
// CUDA doubles, what each runtime answers, and stream events.
#include <gtest/gtest.h>

#include "cuda_runtime/cuda_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"

namespace umem::machine {
namespace {

using test::scoped_env;
using req = gpu_runtime_request;

const std::vector<std::string> kNoCuda{"/nonexistent/libcuda.so.1"};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(GpuRuntimeRequest, ParsesTheFourChoices) {
  EXPECT_EQ(parse_gpu_runtime_request(std::nullopt), req::automatic);
  EXPECT_EQ(parse_gpu_runtime_request("auto"), req::automatic);
  EXPECT_EQ(parse_gpu_runtime_request("rocr"), req::rocr);
  EXPECT_EQ(parse_gpu_runtime_request("cuda"), req::cuda);
  EXPECT_EQ(parse_gpu_runtime_request("none"), req::none);
  try {
    parse_gpu_runtime_request("CUDA");
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "'CUDA' is not a GPU backend; use auto, rocr, cuda or none"));
  }
}

// No ROCr runtime here: topo.hsa as discover_rocr leaves it when no library loads.
topology without_rocr() {
  topology t;
  t.hsa.state = runtime_state::no_library;
  t.hsa.state_reason = "cannot load the ROCm runtime";
  return t;
}

TEST(GpuRuntimeSelection, AutoFallsToCudaWhenTheDriverHasADevice) {
  test::cuda_double_machine served(test::h200_machine());
  topology t = without_rocr();
  const auto b = select_gpu_runtime(t, req::automatic, nullptr, test::cuda_double_candidates());
  EXPECT_EQ(b->kind(), gpu_runtime_kind::cuda);
  EXPECT_EQ(t.gpu_backend.name, "cuda");
  EXPECT_EQ(t.gpu_backend.reason, b->reason());
  EXPECT_TRUE(contains(b->reason(), "the ROCm runtime is no-library: cannot load the ROCm runtime; "
                                    "the CUDA driver "));
  EXPECT_TRUE(contains(b->reason(), " has 1 device")) << b->reason();
  ASSERT_EQ(t.gpus().size(), 1u);
  EXPECT_EQ(t.gpus()[0]->marketing_name, "NVIDIA H200");
  EXPECT_EQ(t.cuda.state, runtime_state::available);
  EXPECT_FALSE(b->host_memory_gpu_accessible(t));  // the H200 has no pageable memory access
  EXPECT_TRUE(b->has_stream_events());
}

TEST(GpuRuntimeSelection, AutoIsNoneWhenNeitherRuntimeIsUsable) {
  topology t = without_rocr();
  const auto b = select_gpu_runtime(t, req::automatic, nullptr, kNoCuda);
  EXPECT_EQ(b->kind(), gpu_runtime_kind::none);
  EXPECT_TRUE(contains(b->reason(), "the ROCm runtime is no-library"));
  EXPECT_TRUE(contains(b->reason(), "the CUDA driver is no-library: cannot load the CUDA driver"));
  EXPECT_EQ(t.cuda.state, runtime_state::no_library);
  EXPECT_FALSE(b->host_memory_gpu_accessible(t));
}

TEST(GpuRuntimeSelection, AutoIsNoneWhenTheCudaDriverSeesNoDevice) {
  scoped_env snap("UMEM_CUDA_DOUBLE_SNAPSHOT", std::nullopt);
  test::cuda_double_reset();
  topology t = without_rocr();
  const auto b = select_gpu_runtime(t, req::automatic, nullptr, test::cuda_double_candidates());
  EXPECT_EQ(b->kind(), gpu_runtime_kind::none);
  EXPECT_EQ(t.cuda.state, runtime_state::no_driver);
  EXPECT_TRUE(contains(b->reason(), "CUDA_ERROR_NO_DEVICE")) << b->reason();
}

TEST(GpuRuntimeSelection, NoneIsNoneEvenWithADriver) {
  test::cuda_double_machine served(test::h200_machine());
  topology t = without_rocr();
  const auto b = select_gpu_runtime(t, req::none, nullptr, test::cuda_double_candidates());
  EXPECT_EQ(b->kind(), gpu_runtime_kind::none);
  EXPECT_EQ(b->reason(), "UMEM_GPU_BACKEND=none");
  EXPECT_EQ(t.cuda.state, runtime_state::not_probed);  // CUDA was never loaded
  EXPECT_TRUE(t.gpus().empty());
}

TEST(GpuRuntimeSelection, AForcedBackendThatIsMissingFallsBackToNoneAndSaysSo) {
  topology t = without_rocr();
  const auto r = select_gpu_runtime(t, req::rocr, nullptr, kNoCuda);
  EXPECT_EQ(r->kind(), gpu_runtime_kind::none);
  EXPECT_TRUE(contains(r->reason(), "UMEM_GPU_BACKEND=rocr, but the ROCm runtime is no-library"));
  EXPECT_EQ(t.cuda.state, runtime_state::not_probed);
  topology u = without_rocr();
  const auto c = select_gpu_runtime(u, req::cuda, nullptr, kNoCuda);
  EXPECT_EQ(c->kind(), gpu_runtime_kind::none);
  EXPECT_TRUE(contains(c->reason(), "UMEM_GPU_BACKEND=cuda, but the CUDA driver is no-library"));
}

TEST(GpuRuntimeSelection, TheEnvironmentChooses) {
  test::cuda_double_machine served(test::h200_machine());
  scoped_env lib("UMEM_CUDA_DRIVER_LIB", UMEM_CUDA_DOUBLE_PATH);
  {
    scoped_env which("UMEM_GPU_BACKEND", "cuda");
    topology t = without_rocr();
    EXPECT_EQ(select_gpu_runtime(t, nullptr)->kind(), gpu_runtime_kind::cuda);
    EXPECT_TRUE(contains(t.gpu_backend.reason, "UMEM_GPU_BACKEND=cuda; the CUDA driver"));
  }
  {
    scoped_env which("UMEM_GPU_BACKEND", "none");
    topology t = without_rocr();
    EXPECT_EQ(select_gpu_runtime(t, nullptr)->kind(), gpu_runtime_kind::none);
  }
  scoped_env bad("UMEM_GPU_BACKEND", "nvidia");
  topology t = without_rocr();
  EXPECT_THROW(select_gpu_runtime(t, nullptr), umem::error);
}

// The ROCr double serving the 4-socket MI300A capture: ROCr is available.
class WithRocr : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, test::kMi300aRocminfo);
    snapshot_ = test::write_snapshot(dir_, test::import_capture(rocminfo));
    snap_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT", snapshot_.string());
    ver_.emplace("UMEM_ROCR_DOUBLE_VERSION", "7.1");
    test::double_reset(UMEM_ROCR_DOUBLE_PATH);
    lib_ = std::make_shared<const hsa::rocr_library>(
        hsa::rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH}));
    hsa::discover_rocr(topo_, *lib_);
    ASSERT_EQ(topo_.hsa.state, runtime_state::available) << topo_.hsa.state_reason;
  }
  void TearDown() override { test::double_reset(UMEM_ROCR_DOUBLE_PATH); }

  test::temp_dir dir_;
  std::filesystem::path snapshot_;
  std::optional<scoped_env> snap_, ver_;
  std::shared_ptr<const hsa::rocr_library> lib_;
  topology topo_;
};

TEST_F(WithRocr, AutoPrefersRocrAndNeverLoadsCuda) {
  test::cuda_double_machine served(test::h200_machine());
  const std::size_t gpus = topo_.gpus().size();
  const auto b = select_gpu_runtime(topo_, req::automatic, lib_, test::cuda_double_candidates());
  EXPECT_EQ(b->kind(), gpu_runtime_kind::rocr);
  EXPECT_TRUE(contains(b->reason(), "the ROCm runtime ")) << b->reason();
  EXPECT_TRUE(contains(b->reason(), " is available")) << b->reason();
  EXPECT_EQ(gpus, topo_.gpus().size());
  EXPECT_EQ(topo_.cuda.state, runtime_state::not_probed);
  // Not loaded at all, or (when an earlier test of this process left it loaded) not called.
  const std::string log = test::cuda_double_log();
  EXPECT_TRUE(log == "<double not loaded>" || log.empty()) << log;
  EXPECT_FALSE(b->has_stream_events());
  try {
    (void)b->make_stream_event(0);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
  }
  // The capture's ISAs say xnack- (R:366), so plain host memory is not GPU-accessible.
  EXPECT_FALSE(b->host_memory_gpu_accessible(topo_));
}

TEST_F(WithRocr, ForcedCudaAddsTheNvidiaGpusAfterTheAmdAgents) {
  test::cuda_double_machine served(test::h200_machine());
  std::uint32_t highest = 0;
  for (const auto& a : topo_.agents) highest = std::max(highest, a.kfd_node);
  const auto b = select_gpu_runtime(topo_, req::cuda, lib_, test::cuda_double_candidates());
  EXPECT_EQ(b->kind(), gpu_runtime_kind::cuda);
  ASSERT_TRUE(topo_.agents.back().cuda.has_value());
  EXPECT_EQ(topo_.agents.back().kfd_node, highest + 1);
}

TEST(GpuRuntimeEvents, CudaEventsFollowTheStream) {
  test::cuda_double_machine served(test::h200_machine());
  topology t = without_rocr();
  const auto b = select_gpu_runtime(t, req::cuda, nullptr, test::cuda_double_candidates());
  ASSERT_EQ(b->kind(), gpu_runtime_kind::cuda);
  const std::string before = test::cuda_double_log();
  {
    auto ev = b->make_stream_event(0);
    EXPECT_TRUE(ev->query());  // nothing recorded yet
    ev->record(nullptr);
    EXPECT_TRUE(ev->query());
    test::cuda_double_hold_events(true);  // the GPU has not reached the mark
    ev->record(nullptr);
    EXPECT_FALSE(ev->query());
    ev->synchronize();
    EXPECT_TRUE(ev->query());
  }
  // 0x2 = CU_EVENT_DISABLE_TIMING; the primary context is retained for the event's life.
  EXPECT_EQ(test::cuda_double_log().substr(before.size()),
            "retain 0\nevent_create e1 0x2\nevent_query e1\nevent_record e1\nevent_query e1\n"
            "event_record e1\nevent_query e1\nevent_synchronize e1\nevent_query e1\n"
            "event_destroy e1\nrelease 0\n");
  EXPECT_THROW((void)b->make_stream_event(1), umem::error);  // one device only
}

TEST(GpuRuntimeEvents, TheNoneBackendsEventsAreImmediate) {
  const auto b = make_no_runtime("test");
  auto ev = b->make_stream_event(0);
  ev->record(nullptr);
  EXPECT_TRUE(ev->query());
  ev->synchronize();
}

}  // namespace
}  // namespace umem::machine
