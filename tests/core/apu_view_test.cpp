// apu_sockets on small hand-built models. The capture-based assertions (4-socket MI300A rocminfo +
// numactl through the importers) live in tests/umtopo/capture_model_test.cpp.
#include <gtest/gtest.h>

#include "umem/core/apu_view.hpp"

namespace umem {
namespace {

constexpr std::uint64_t kKiB = 1024;

memory_pool global_pool(std::uint32_t flags, std::uint64_t size, bool alloc = true) {
  memory_pool p;
  p.global_flags = flags;
  p.size_bytes = size;
  p.alloc_allowed = alloc;
  return p;
}

agent cpu_agent(std::uint32_t kfd, std::uint64_t pool_bytes) {
  agent a;
  a.kind = agent_kind::cpu;
  a.kfd_node = kfd;
  a.pools = {global_pool(pool_flag::fine_grained, pool_bytes),
             global_pool(pool_flag::kernarg_init | pool_flag::fine_grained, pool_bytes),
             global_pool(pool_flag::coarse_grained, pool_bytes)};
  return a;
}

agent gpu_agent(std::uint32_t kfd, std::uint64_t pool_bytes) {
  agent a;
  a.kind = agent_kind::gpu;
  a.kfd_node = kfd;
  memory_pool group;
  group.segment = pool_segment::group;
  group.size_bytes = 64 * kKiB;
  a.pools = {global_pool(pool_flag::coarse_grained, pool_bytes),
             global_pool(pool_flag::extended_scope_fine_grained, pool_bytes),
             global_pool(pool_flag::fine_grained, pool_bytes), group};
  return a;
}

numa_node node(int index, std::vector<unsigned> cpus, std::uint64_t bytes) {
  numa_node n;
  n.os_index = index;
  n.cpus = std::move(cpus);
  n.memory_total_bytes = bytes;
  return n;
}

gpu_numa_binding bind(std::uint32_t gpu, std::optional<int> numa) { return {gpu, numa, "test", "set by the test"}; }

TEST(ApuSockets, EmptyModelHasNoSockets) { EXPECT_TRUE(apu_sockets(topology{}).empty()); }

TEST(ApuSockets, NumaOnlyModelGivesOneSocketPerNode) {
  topology t;
  t.numa.nodes = {node(0, {0, 1}, 4 << 20), node(1, {2, 3}, 8 << 20)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].numa_node, 1);
  EXPECT_EQ(s[1].numa, &t.numa.nodes[1]);
  EXPECT_EQ(s[1].socket_memory_bytes, 8u << 20);
  EXPECT_TRUE(s[1].cpu_agents.empty());
  EXPECT_TRUE(s[1].gpu_agents.empty());
  EXPECT_EQ(s[1].gpu_allocatable_bytes, 0u);
}

TEST(ApuSockets, PoolsOfOneAgentAreNeverSummed) {
  topology t;
  t.agents = {cpu_agent(0, 1000 * kKiB), gpu_agent(1, 750 * kKiB)};
  t.agents[1].pools.push_back(global_pool(pool_flag::coarse_grained, 5000 * kKiB, /*alloc=*/false));
  t.gpu_numa = {bind(1, 0)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].numa, nullptr);
  EXPECT_EQ(s[0].socket_memory_bytes, 1000 * kKiB) << "one CPU agent's largest pool, not 3 pools";
  EXPECT_EQ(s[0].gpu_allocatable_bytes, 750 * kKiB) << "largest allocatable pool only";
  EXPECT_EQ(largest_allocatable_global_pool(t.agents[1]), 750 * kKiB);
}

TEST(ApuSockets, WithoutNumaCpuAgentsMapByIdentityAndUnboundGpusGoLast) {
  // A rocminfo-only model: no NUMA data, no GPU binding.
  topology t;
  t.agents = {cpu_agent(1, 200 * kKiB), cpu_agent(0, 100 * kKiB), gpu_agent(2, 75 * kKiB), gpu_agent(3, 75 * kKiB)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].numa_node, 0);
  ASSERT_EQ(s[0].cpu_agents.size(), 1u);
  EXPECT_EQ(s[0].cpu_agents[0]->kfd_node, 0u) << "ascending KFD node, not HSA order";
  EXPECT_EQ(s[1].cpu_agents[0]->kfd_node, 1u);
  EXPECT_EQ(s[1].socket_memory_bytes, 200 * kKiB);
  EXPECT_EQ(s[2].numa_node, -1);
  EXPECT_EQ(s[2].gpu_agents.size(), 2u);
  EXPECT_TRUE(s[0].gpu_agents.empty());
}

TEST(ApuSockets, CpuAgentsSkipMemoryOnlyNumaNodes) {
  // docs/rocm-runtime.md §4: KFD CPU node i is the i-th NUMA node that has CPUs.
  topology t;
  t.numa.nodes = {node(0, {0}, 1 << 20), node(1, {}, 2 << 20), node(2, {1}, 3 << 20)};
  t.agents = {cpu_agent(0, 1), cpu_agent(1, 1)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].cpu_agents.size(), 1u);
  EXPECT_TRUE(s[1].cpu_agents.empty()) << "node 1 has no CPUs";
  ASSERT_EQ(s[2].cpu_agents.size(), 1u);
  EXPECT_EQ(s[2].cpu_agents[0]->kfd_node, 1u);
}

TEST(ApuSockets, SurplusCpuAgentsAreCollectedUnplaced) {
  topology t;
  t.numa.nodes = {node(0, {0}, 1 << 20)};
  t.agents = {cpu_agent(0, 1), cpu_agent(1, 1)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].numa_node, -1);
  ASSERT_EQ(s[1].cpu_agents.size(), 1u);
  EXPECT_EQ(s[1].cpu_agents[0]->kfd_node, 1u);
}

TEST(ApuSockets, PartitionsOfOneSocketAddTheirShares) {
  // TPX: one socket's GPU appears as 3 agents, each with a third of the socket's GPU memory.
  topology t;
  t.numa.nodes = {node(0, {0}, 120 * kKiB)};
  t.agents = {cpu_agent(0, 120 * kKiB), gpu_agent(1, 30 * kKiB), gpu_agent(2, 30 * kKiB), gpu_agent(3, 30 * kKiB)};
  t.gpu_numa = {bind(1, 0), bind(2, 0), bind(3, 0)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].gpu_agents.size(), 3u);
  EXPECT_EQ(s[0].gpu_allocatable_bytes, 90 * kKiB);
  EXPECT_EQ(s[0].socket_memory_bytes, 120 * kKiB) << "NUMA memory wins over the CPU pool";
}

TEST(ApuSockets, GpuBoundToNoNodeOrToAnUnknownNode) {
  topology t;
  t.numa.nodes = {node(0, {0}, 1 << 20)};
  t.agents = {gpu_agent(4, 1), gpu_agent(5, 1)};
  t.gpu_numa = {bind(4, std::nullopt), bind(5, 3)};
  const auto s = apu_sockets(t);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].numa_node, 0);
  EXPECT_TRUE(s[0].gpu_agents.empty());
  EXPECT_EQ(s[1].numa_node, 3) << "a binding names a node the NUMA data lacks: shown, not dropped";
  EXPECT_EQ(s[1].numa, nullptr);
  ASSERT_EQ(s[1].gpu_agents.size(), 1u);
  EXPECT_EQ(s[1].gpu_agents[0]->kfd_node, 5u);
  EXPECT_EQ(s[2].numa_node, -1);
  ASSERT_EQ(s[2].gpu_agents.size(), 1u);
  EXPECT_EQ(s[2].gpu_agents[0]->kfd_node, 4u);
}

}  // namespace
}  // namespace umem
