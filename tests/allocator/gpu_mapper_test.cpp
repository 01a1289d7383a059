// GPU visibility through ROCr, checked call by call on the ROCr test double serving the real
// 4-socket MI300A rocminfo capture (NUMA nodes from the real 4-socket numactl capture, GPU->NUMA
// bindings from umem::numa::map_gpus_to_numa). The double logs every memory call; the tests
// compare the log with the calls a socket's segment must cause and nothing else.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"

namespace {

using namespace umem::alloc;
using umem::coherence;
using umem::hsa::rocr_library;
using umem::test::scoped_env;
using namespace umem::alloc::test;
using umem::machine::gpu_runtime_request;
using umem::machine::select_gpu_runtime;


TEST_F(GpuMapperDouble, XnackOffLocksToTheSocketsCpuPoolForItsGpuOnly) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const auto* rocr = dynamic_cast<const rocr_gpu_mapper*>(mapper_.get());
  ASSERT_NE(rocr, nullptr) << mapper_->describe();
  EXPECT_EQ(rocr->mode(), gpu_map_mode::lock);
  EXPECT_TRUE(mapper_->gpu_accessible());
  EXPECT_EQ(mapper_->describe().find("XNACK off: segments are locked"), 0u) << mapper_->describe();
  // Agents 1-4 are the CPUs of KFD nodes 0-3 (capture lines 33, 98, 163, 228), each with pools
  // FINE, EXTENDED FINE, KERNARG+FINE, COARSE in this order (lines 52-76, 117-141, 182-206,
  // 247-271); agents 5-8 are the GPUs of KFD nodes 4-7 (lines 293, 397, 501, 605).
  for (int n = 0; n < 4; ++n) {
    SCOPED_TRACE("socket " + std::to_string(n));
    const std::string cpu = "node" + std::to_string(n), gpu = "node" + std::to_string(4 + n);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::fine), cpu + "/0", gpu);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::extended_fine), cpu + "/1", gpu);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::coarse), cpu + "/3", gpu);
  }
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

TEST_F(GpuMapperDouble, XnackOnSetsSvmAttributesForTheSocketsGpuAndNeverLocks) {
  claim_xnack_on();
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const auto* rocr = dynamic_cast<const rocr_gpu_mapper*>(mapper_.get());
  ASSERT_NE(rocr, nullptr) << mapper_->describe();
  EXPECT_EQ(rocr->mode(), gpu_map_mode::svm);
  EXPECT_EQ(mapper_->describe().find("XNACK on: segments are made accessible in place"), 0u)
      << mapper_->describe();
  const std::string size = "size=" + std::to_string(kSegment);
  for (int n = 0; n < 4; ++n) {
    SCOPED_TRACE("socket " + std::to_string(n));
    const std::string gpu = "node" + std::to_string(4 + n);
    // global_flag values: HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED 0, COARSE_GRAINED 1; extended_fine
    // has no SVM model of its own and gets FINE_GRAINED.
    for (const auto& [kind, flag] : {std::pair{coherence::fine, 0}, std::pair{coherence::coarse, 1},
                                     std::pair{coherence::extended_fine, 0}}) {
      const segment s = on_node(buffer_.get(), n, kind);
      mapper_->map(s);
      mapper_->unmap(s);
      EXPECT_EQ(take_log(),
                (std::vector<std::string>{
                    "svm_attributes_set host " + size + " global_flag=" + std::to_string(flag) +
                        " agent_accessible_in_place=" + gpu + " -> SUCCESS",
                    "svm_attributes_set host " + size + " agent_no_access=" + gpu +
                        " -> SUCCESS"}));
    }
  }
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

TEST_F(GpuMapperDouble, InterleavedSegmentsReachEveryGpuOfTheSet) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const segment all{buffer_.get(), kSegment, node_binding{bind_mode::interleave, {0, 1, 2, 3}},
                    coherence::fine, true};
  expect_lock_cycle(all, "node0/0", "node4,node5,node6,node7");
  const segment two{buffer_.get(), kSegment, node_binding{bind_mode::interleave, {1, 3}},
                    coherence::coarse, true};
  expect_lock_cycle(two, "node1/3", "node5,node7");
}

TEST_F(GpuMapperDouble, InterleavedSvmSegmentsReachEveryGpuOfTheSet) {
  claim_xnack_on();
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const segment s{buffer_.get(), kSegment, node_binding{bind_mode::interleave, {2, 3}},
                  coherence::fine, true};
  mapper_->map(s);
  EXPECT_EQ(take_log(), std::vector<std::string>{"svm_attributes_set host size=" +
                                                 std::to_string(kSegment) +
                                                 " global_flag=0 agent_accessible_in_place=node6 "
                                                 "agent_accessible_in_place=node7 -> SUCCESS"});
  mapper_->unmap(s);
}

TEST_F(GpuMapperDouble, Rocr523WithoutExtendedFinePoolsFallsBackToFine) {
  drop_cpu_extended_fine_pools();
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_523_PATH, "5.2.3"));
  const auto* rocr = dynamic_cast<const rocr_gpu_mapper*>(mapper_.get());
  ASSERT_NE(rocr, nullptr) << mapper_->describe();
  EXPECT_EQ(rocr->mode(), gpu_map_mode::lock);  // 5.2.3 has no XNACK_ENABLED; the ISA says xnack-
  EXPECT_NE(mapper_->describe().find("extended_fine uses FINE_GRAINED"), std::string::npos)
      << mapper_->describe();
  // CPU pools left: FINE (0), KERNARG+FINE (1), COARSE (2).
  for (int n = 0; n < 4; ++n) {
    SCOPED_TRACE("socket " + std::to_string(n));
    const std::string cpu = "node" + std::to_string(n), gpu = "node" + std::to_string(4 + n);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::fine), cpu + "/0", gpu);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::extended_fine), cpu + "/0", gpu);
    expect_lock_cycle(on_node(buffer_.get(), n, coherence::coarse), cpu + "/2", gpu);
  }
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

TEST_F(GpuMapperDouble, ARocrErrorBecomesAnErrorNamingTheCall) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const segment s = on_node(buffer_.get(), 2, coherence::fine);
  mapper_->map(s);
  segment half = s;
  half.size = kSegment / 2;
  try {
    // The double rejects a lock overlapping a locked range in part, with INVALID_ARGUMENT.
    mapper_->map(half);
    FAIL() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::runtime_error);
    const std::string what = e.what();
    EXPECT_NE(what.find("on NUMA node 2 GPU-accessible: hsa_amd_memory_lock_to_pool failed: "
                        "0x1001 HSA_STATUS_ERROR_INVALID_ARGUMENT"),
              std::string::npos)
        << what;
  }
  mapper_->unmap(s);
  mapper_->unmap(s);  // a second unlock fails inside ROCr: logged, not thrown
  const auto l = take_log();
  ASSERT_EQ(l.size(), 4u) << log();
  EXPECT_NE(l[1].find("-> INVALID_ARGUMENT (overlaps locked or pool memory)"), std::string::npos);
  EXPECT_EQ(l[3], "memory_unlock host -> INVALID_ARGUMENT");
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

TEST_F(GpuMapperDouble, ALockRefusedForLackOfResourcesIsOutOfMemory) {
  // So that the pool trims and retries, the spill policy applies and PyTorch raises its OOM.
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const segment s = on_node(buffer_.get(), 2, coherence::fine);
  auto fail_next_lock = umem::test::double_control<void (*)(std::uint32_t)>(
      UMEM_ROCR_DOUBLE_PATH, "umem_rocr_double_fail_next_lock");
  ASSERT_NE(fail_next_lock, nullptr);
  fail_next_lock(0x1008);  // HSA_STATUS_ERROR_OUT_OF_RESOURCES
  try {
    mapper_->map(s);
    FAIL() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("hsa_amd_memory_lock_to_pool failed: 0x1008"),
              std::string::npos)
        << e.what();
  }
  mapper_->map(s);  // the next lock succeeds
  mapper_->unmap(s);
  EXPECT_EQ(shut_down().find("leak"), std::string::npos) << log();
}

TEST_F(GpuMapperDouble, AForgottenUnmapShowsAsALeak) {
  // The leak checks above can fail: a segment never unmapped is still locked at shutdown.
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  mapper_->map(on_node(buffer_.get(), 1, coherence::fine));
  EXPECT_TRUE(std::regex_search(shut_down(), std::regex("leak l[0-9]+ size=2097152\n")))
      << log();
}

TEST_F(GpuMapperDouble, MisuseAndNodesWithoutGpuAreErrorsBeforeAnyRocrCall) {
  // GPU of socket 3 unbound, as if its NUMA node could not be decided.
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1", [](umem::topology& t) {
    t.gpu_numa[3].numa_node = std::nullopt;
  }));
  const auto code_and_text = [&](const segment& s) {
    try {
      mapper_->map(s);
    } catch (const umem::error& e) {
      return std::pair{e.code(), std::string(e.what())};
    }
    return std::pair{umem::errc::internal, std::string("no error")};
  };
  auto [code, text] = code_and_text(on_node(buffer_.get(), 3, coherence::fine));
  EXPECT_EQ(code, umem::errc::unsupported);
  EXPECT_NE(text.find("no GPU agent is local to NUMA node 3"), std::string::npos) << text;
  std::tie(code, text) = code_and_text(on_node(buffer_.get(), 9, coherence::fine));
  EXPECT_EQ(code, umem::errc::invalid_argument);
  EXPECT_NE(text.find("NUMA node 9 is not in the topology (nodes: 0,1,2,3)"), std::string::npos)
      << text;
  segment empty = on_node(buffer_.get(), 0, coherence::fine);
  empty.size = 0;
  EXPECT_EQ(code_and_text(empty).first, umem::errc::invalid_argument);
  EXPECT_EQ(code_and_text(on_node(buffer_.get(), 0, coherence::unknown)).first,
            umem::errc::invalid_argument);
  EXPECT_TRUE(take_log().empty()) << log();
}

TEST_F(GpuMapperDouble, ATopologyWithoutGpuBindingsIsRejected) {
  try {
    start(UMEM_ROCR_DOUBLE_PATH, "7.1", [](umem::topology& t) { t.gpu_numa.clear(); });
    FAIL() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("4 GPU agents but no GPU->NUMA bindings"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(GpuMapperDouble, NoDriverSelectsTheHostOnlyBackend) {
  // The double without a snapshot is a node without /dev/kfd: hsa_init returns OUT_OF_RESOURCES.
  scoped_env ver("UMEM_ROCR_DOUBLE_VERSION", "7.1");
  scoped_env snap("UMEM_ROCR_DOUBLE_SNAPSHOT", std::nullopt);
  const auto lib = std::make_shared<const rocr_library>(
      rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH}));
  umem::topology topo;
  umem::hsa::discover_rocr(topo, *lib);
  ASSERT_EQ(topo.hsa.state, umem::runtime_state::no_driver);
  umem::test::double_reset(UMEM_ROCR_DOUBLE_PATH);
  const auto runtime = select_gpu_runtime(topo, gpu_runtime_request::automatic, lib, {});
  EXPECT_EQ(topo.gpu_backend.name, "none");
  const auto mapper = make_gpu_mapper(*runtime, topo);
  ASSERT_NE(dynamic_cast<const no_gpu_mapper*>(mapper.get()), nullptr);
  EXPECT_FALSE(mapper->gpu_accessible());
  EXPECT_NE(mapper->describe().find(topo.hsa.state_reason), std::string::npos)
      << mapper->describe();
  const segment s = on_node(buffer_.get(), 0, coherence::fine);
  mapper->map(s);
  mapper->unmap(s);
  EXPECT_EQ(umem::test::double_call_log(UMEM_ROCR_DOUBLE_PATH), "");  // no runtime call at all
}

}  // namespace
