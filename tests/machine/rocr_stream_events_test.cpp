// The ROCr runtime's stream events (machine/src/hip_stream_event.hpp): selected on the ROCr double
// serving the 4-socket MI300A capture, with HIP events from the HIP double once the test has
// mapped it (as PyTorch for ROCm maps libamdhip64). Streams are fake handles: the double never dereferences
// them; a stream is busy from umem_hip_double_pending until umem_hip_double_complete.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hip_runtime/hip_test_env.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/machine/live_machine.hpp"

namespace {

using umem::errc;
using umem::test::mapped_hip_double;
using umem::test::scoped_env;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void* const kStreamA = reinterpret_cast<void*>(0xA000);

class RocrStreamEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, umem::test::kMi300aRocminfo);
    snap_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT",
                  umem::test::write_snapshot(dir_, umem::test::import_capture(rocminfo)).string());
    ver_.emplace("UMEM_ROCR_DOUBLE_VERSION", "7.1");
    lib_ = std::make_shared<const umem::hsa::rocr_library>(
        umem::hsa::rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH}));
    umem::hsa::discover_rocr(topo_, *lib_);
    ASSERT_EQ(topo_.hsa.state, umem::runtime_state::available) << topo_.hsa.state_reason;
  }

  // The backend auto selection picks, with UMEM_HIP_RUNTIME_LIB naming `hip`.
  std::shared_ptr<const umem::machine::gpu_runtime> backend(const char* hip) {
    const scoped_env lib("UMEM_HIP_RUNTIME_LIB", hip);
    auto b = umem::machine::select_gpu_runtime(
        topo_, umem::machine::gpu_runtime_request::automatic, lib_, std::vector<std::string>{});
    EXPECT_EQ(b->kind(), umem::machine::gpu_runtime_kind::rocr);
    return b;
  }

  // The HIP double mapped, serving one device per GPU of the capture (4).
  std::shared_ptr<const umem::machine::gpu_runtime> backend_with_hip() {
    hip_.emplace(UMEM_HIP_DOUBLE_PATH);
    EXPECT_TRUE(hip_->ok()) << dlerror();
    hip_->reset(static_cast<int>(topo_.gpus().size()));
    return backend(UMEM_HIP_DOUBLE_PATH);
  }

  umem::test::temp_dir dir_;
  std::optional<scoped_env> snap_, ver_;
  std::shared_ptr<const umem::hsa::rocr_library> lib_;
  umem::topology topo_;
  std::optional<mapped_hip_double> hip_;  // declared last: unmapped after the backend is gone
};

TEST_F(RocrStreamEvents, TheLiveMachineLoadsRocrOnceAndItsBackendKeepsThatLoad) {
  const scoped_env lib("UMEM_HSA_RUNTIME_LIB", UMEM_ROCR_DOUBLE_PATH);
  const scoped_env request("UMEM_GPU_BACKEND", "rocr");
  const umem::machine::live_machine m = umem::machine::discover_live_machine();
  ASSERT_EQ(m.runtime->kind(), umem::machine::gpu_runtime_kind::rocr) << m.topo.gpu_backend.reason;
  ASSERT_NE(m.rocr, nullptr);
  EXPECT_GT(m.rocr.use_count(), 1);  // the backend holds the machine's library, not a second one
}

TEST_F(RocrStreamEvents, WithoutHipThereAreNoneAndTheReasonSaysWhy) {
  if (umem::test::is_mapped(UMEM_HIP_DOUBLE_PATH)) GTEST_SKIP() << "the HIP double is mapped";
  const auto b = backend(UMEM_HIP_DOUBLE_PATH);
  EXPECT_FALSE(b->has_stream_events());
  EXPECT_TRUE(b->reason().ends_with(
      "; no stream events: HIP is not loaded in this process (PyTorch for ROCm loads it)"))
      << b->reason();
  EXPECT_EQ(topo_.gpu_backend.reason, b->reason());
  try {
    (void)b->make_stream_event(0);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_TRUE(contains(e.what(), "HIP is not loaded in this process (PyTorch for ROCm loads "
                                   "it)"))
        << e.what();
    EXPECT_TRUE(contains(e.what(), "the ROCr backend has no stream events")) << e.what();
  }
  EXPECT_FALSE(umem::test::is_mapped(UMEM_HIP_DOUBLE_PATH));  // looking did not map it
}

TEST_F(RocrStreamEvents, AnEventOnABusyStreamCompletesWithTheStream) {
  const auto b = backend_with_hip();
  ASSERT_TRUE(b->has_stream_events()) << b->reason();
  EXPECT_TRUE(b->reason().ends_with(std::string("; stream events: HIP ") + UMEM_HIP_DOUBLE_PATH))
      << b->reason();
  const int live = hip_->live_events();  // events an earlier test of this process left
  {
    auto ev = b->make_stream_event(2);
    EXPECT_EQ(hip_->last_event_device(), 2);
    EXPECT_EQ(hip_->last_event_flags(), 0x2);  // hipEventDisableTiming (hip_runtime_api.h)
    EXPECT_TRUE(ev->query());                  // nothing recorded yet
    hip_->pending(kStreamA);
    ev->record(kStreamA);
    EXPECT_FALSE(ev->query());
    EXPECT_FALSE(ev->query());  // still: only the stream's completion releases it
    hip_->complete(kStreamA);
    EXPECT_TRUE(ev->query());
    ev->record(kStreamA);  // an idle stream: passed at once
    EXPECT_TRUE(ev->query());
    EXPECT_EQ(hip_->calls("hipEventRecord"), 2);
    EXPECT_EQ(hip_->live_events(), live + 1);
  }
  EXPECT_EQ(hip_->calls("hipEventDestroy"), 1);
  EXPECT_EQ(hip_->live_events(), live);
}

TEST_F(RocrStreamEvents, SynchronizeWaitsForTheMark) {
  const auto b = backend_with_hip();
  auto ev = b->make_stream_event(0);
  hip_->pending(kStreamA);
  ev->record(kStreamA);
  ASSERT_FALSE(ev->query());
  ev->synchronize();  // the double lets the GPU reach the event
  EXPECT_TRUE(ev->query());
  EXPECT_EQ(hip_->calls("hipEventSynchronize"), 1);
}

TEST_F(RocrStreamEvents, TheCallersDeviceIsRestored) {
  const auto b = backend_with_hip();
  ASSERT_EQ(hip_->set_device(1), 0);  // the framework's current device
  auto ev = b->make_stream_event(3);
  EXPECT_EQ(hip_->last_event_device(), 3);
  EXPECT_EQ(hip_->current_device(), 1);
  // The null stream is the current device's: recording switches to the event's device (the
  // double rejects a null-stream record from another device) and back.
  ev->record(nullptr);
  EXPECT_EQ(hip_->current_device(), 1);
  EXPECT_EQ(hip_->calls("hipEventRecord"), 1);
}

TEST_F(RocrStreamEvents, FailuresAreUmemErrors) {
  const auto b = backend_with_hip();
  try {
    (void)b->make_stream_event(4);  // the double has devices 0-3
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "HIP device 4 does not exist (4 devices")) << e.what();
  }
  ASSERT_EQ(hip_->set_device(1), 0);
  hip_->fail_next("hipEventCreateWithFlags", 999);
  try {
    (void)b->make_stream_event(2);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_TRUE(contains(e.what(), "hipEventCreateWithFlags failed: hipErrorUnknown")) << e.what();
  }
  EXPECT_EQ(hip_->current_device(), 1);  // restored on the failure path too
  auto ev = b->make_stream_event(0);
  hip_->fail_next("hipEventQuery", 719);  // hipErrorLaunchFailure: a kernel on the stream faulted
  try {
    (void)ev->query();
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_EQ(e.what(), umem::test::hip_double_launch_failure("hipEventQuery"));
  }
  hip_->fail_next("hipEventRecord", 400);
  EXPECT_THROW(ev->record(kStreamA), umem::error);
}

TEST_F(RocrStreamEvents, AnUnusableHipMeansNoEventsAndSaysWhy) {
  hip_.emplace(UMEM_HIP_DOUBLE_PARTIAL_PATH);
  ASSERT_TRUE(hip_->ok()) << dlerror();
  const auto b = backend(UMEM_HIP_DOUBLE_PARTIAL_PATH);
  EXPECT_FALSE(b->has_stream_events());
  EXPECT_TRUE(contains(b->reason(), "no stream events: the HIP runtime "))
      << b->reason();
  EXPECT_TRUE(contains(b->reason(), "lacks the required symbol hipEventSynchronize"))
      << b->reason();
  EXPECT_THROW((void)b->make_stream_event(0), umem::error);
}

}  // namespace
