// apu_sockets on the real 4-socket MI300A captures. Expected values are read from the captures:
// rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt (R:line) and
// numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt (N:line). The two files come from two
// different 4-socket nodes; the model joins them as a user joining two captures would.
#include <gtest/gtest.h>

#include "capture_model.hpp"
#include "umem/core/apu_view.hpp"

namespace umem {
namespace {

constexpr std::uint64_t kKiB = 1024, kMiB = kKiB * kKiB;

TEST(CaptureModel, FourSocketsEachWithOneCpuOneGpu) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  const auto sockets = apu_sockets(topo);
  ASSERT_EQ(sockets.size(), 4u) << "no unplaced entry: every agent has a node";
  // N:6,9,12,15 "node i size: ... MB" (numactl's MB are MiB).
  const std::uint64_t node_mib[] = {128193, 128719, 128719, 128661};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& s = sockets[i];
    SCOPED_TRACE("socket " + std::to_string(i));
    EXPECT_EQ(s.numa_node, static_cast<int>(i));
    ASSERT_NE(s.numa, nullptr);
    ASSERT_EQ(s.cpu_agents.size(), 1u);
    EXPECT_EQ(s.cpu_agents[0]->kfd_node, i) << "R:33,98,163,228 CPU agents are KFD nodes 0-3";
    ASSERT_EQ(s.gpu_agents.size(), 1u);
    EXPECT_EQ(s.gpu_agents[0]->kfd_node, 4 + i) << "R:293,397,501,605 GPU agents are KFD nodes 4-7";
    // R:334 "Size: 98647808(0x5e13f00) KB" on each GPU's three GLOBAL pools: counted once.
    EXPECT_EQ(s.gpu_allocatable_bytes, 98647808 * kKiB);
    EXPECT_EQ(s.socket_memory_bytes, node_mib[i] * kMiB);
  }
  EXPECT_EQ(sockets[0].numa->cpus.size(), 48u) << "N:4 0-23 and 96-119";
}

TEST(CaptureModel, RocminfoAloneFallsBackToCpuPoolsAndLeavesGpusUnplaced) {
  UMEM_REQUIRE_FIXTURE(path, test::kRocminfo4Socket);
  const topology topo = importers::import_rocminfo(test::read_text(path), "rocminfo").topo;
  const auto sockets = apu_sockets(topo);
  ASSERT_EQ(sockets.size(), 5u);
  // R:53,118,183,248 CPU pool sizes in KB.
  const std::uint64_t cpu_pool_kib[] = {130750360, 131809200, 131764472, 131797612};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sockets[i].numa, nullptr);
    EXPECT_EQ(sockets[i].socket_memory_bytes, cpu_pool_kib[i] * kKiB);
    EXPECT_TRUE(sockets[i].gpu_agents.empty()) << "no binding: a GPU is never guessed onto a socket";
  }
  EXPECT_EQ(sockets[4].numa_node, -1);
  EXPECT_EQ(sockets[4].gpu_agents.size(), 4u);
  EXPECT_EQ(sockets[4].gpu_allocatable_bytes, 4 * 98647808 * kKiB);
}

}  // namespace
}  // namespace umem
