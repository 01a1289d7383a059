// map_gpus_to_numa on topologies imported from real captures, one method at a time.
#include "umem/numa/gpu_numa_mapping.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/fixtures.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"

namespace fs = std::filesystem;
using umem::gpu_numa_binding;
using umem::topology;

namespace {

umem::agent& agent_at(topology& t, std::uint32_t kfd) {
  for (auto& a : t.agents)
    if (a.kfd_node == kfd) return a;
  throw std::runtime_error("no agent at KFD node " + std::to_string(kfd));
}

// rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt (through the rocminfo importer):
// CPU agents at Node 0-3 (lines 33, 98, 163, 228); GPU agents at Node 4-7 (lines 293, 397, 501,
// 605), Chip ID 29856(0x74a0), BDFID 512, 16640, 33024, 49408, "Memory Properties: APU". NUMA
// nodes from numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt (through the numactl importer):
// node i has CPUs 24i..24i+23 and 96+24i..96+24i+23.
class mi300a_mapping : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt");
    UMEM_REQUIRE_FIXTURE(numactl, "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt");
    topo =
        umem::importers::import_rocminfo(umem::test::read_text(rocminfo), rocminfo.string()).topo;
    topo.numa =
        umem::importers::import_numactl(umem::test::read_text(numactl), numactl.string()).numa;
    // What the tests below rely on, checked so a changed import fails here, not obscurely later.
    ASSERT_EQ(topo.cpus().size(), 4u);
    ASSERT_EQ(topo.gpus().size(), 4u);
    ASSERT_EQ(topo.numa.nodes.size(), 4u);
    ASSERT_EQ(agent_at(topo, 5).bdfid, 16640u);
  }
  topology topo;
};

// rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt: CPU agents Node 0-1 (lines 31, 84), GPU
// agents Node 2-5 (lines 137-444), Chip ID 29857(0x74a1), BDFID 9728, 17920, 25856, 34048, no
// "Memory Properties" line (ROCr older than 6.1). No NUMA capture exists for this machine.
class mi300x_mapping : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, "rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt");
    topo =
        umem::importers::import_rocminfo(umem::test::read_text(rocminfo), rocminfo.string()).topo;
    ASSERT_EQ(topo.cpus().size(), 2u);
    ASSERT_EQ(topo.gpus().size(), 4u);
    ASSERT_EQ(agent_at(topo, 3).bdfid, 17920u);
  }
  topology topo;
};

umem::kfd_node kfd(std::uint32_t id, bool gpu) {
  umem::kfd_node n;
  n.id = id;
  n.properties["simd_count"] = gpu ? 912 : 0;
  return n;
}

umem::kfd_io_link link(std::uint32_t from, std::uint32_t to, std::uint32_t type,
                       std::uint32_t weight) {
  umem::kfd_io_link l;
  l.type = type;
  l.node_from = from;
  l.node_to = to;
  l.weight = weight;
  return l;
}

const gpu_numa_binding& binding_of(const std::vector<gpu_numa_binding>& b, std::uint32_t kfd) {
  for (const auto& x : b)
    if (x.gpu_kfd_node == kfd) return x;
  throw std::runtime_error("no binding for KFD node " + std::to_string(kfd));
}

bool says(const gpu_numa_binding& b, const std::string& what) {
  return b.evidence.find(what) != std::string::npos;
}

// A fake sysfs tree holding /sys/bus/pci/devices/<addr>/{numa_node,local_cpus}.
struct fake_pci {
  fs::path root;
  fake_pci() {
    root = fs::temp_directory_path() /
           ("umem_numa_pci_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~fake_pci() { fs::remove_all(root); }
  void device(const std::string& addr, const std::string& numa_node,
              const std::string& local_cpus) const {
    const fs::path dir = root / "sys/bus/pci/devices" / addr;
    fs::create_directories(dir);
    if (!numa_node.empty()) std::ofstream(dir / "numa_node") << numa_node << "\n";
    if (!local_cpus.empty()) std::ofstream(dir / "local_cpus") << local_cpus << "\n";
  }
};

}  // namespace

TEST_F(mi300a_mapping, kfd_order_puts_gpu_i_on_node_i) {
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  ASSERT_EQ(b.size(), 4u);
  for (std::uint32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(b[i].evidence);
    EXPECT_EQ(b[i].gpu_kfd_node, 4 + i);
    EXPECT_EQ(b[i].numa_node, static_cast<int>(i));
    EXPECT_EQ(b[i].method, "kfd-order");
    EXPECT_TRUE(says(b[i], "assumed")) << "kfd-order is an assumption and must say so";
  }
}

TEST_F(mi300a_mapping, kfd_order_also_accepts_chip_id_without_apu_property) {
  for (auto* g : topo.gpus()) agent_at(topo, g->kfd_node).is_apu.reset();  // as ROCr < 6.1
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 6).numa_node, 2);
  EXPECT_EQ(binding_of(b, 6).method, "kfd-order");
}

TEST_F(mi300a_mapping, nearest_cpu_wins_over_kfd_order) {
  // Point GPU 4 at KFD CPU node 2, where kfd-order would say 0, to see which method decided.
  agent_at(topo, 4).nearest_cpu_kfd_node = 2;
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 4).numa_node, 2);
  EXPECT_EQ(binding_of(b, 4).method, "rocr-nearest-cpu");
  EXPECT_EQ(binding_of(b, 5).method, "kfd-order");
}

TEST_F(mi300a_mapping, io_link_lowest_weight_cpu_link_decides) {
  for (std::uint32_t i = 0; i < 8; ++i) topo.kfd_nodes.push_back(kfd(i, i >= 4));
  // GPU 5: an XGMI link to GPU 4 is the lightest but is not a CPU; of the CPU links, node 3 wins.
  topo.kfd_nodes[5].io_links = {link(5, 4, 11, 15), link(5, 1, 11, 40), link(5, 3, 11, 20)};
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 5).numa_node, 3);
  EXPECT_EQ(binding_of(b, 5).method, "kfd-io-link");
  EXPECT_TRUE(says(binding_of(b, 5), "5->3")) << binding_of(b, 5).evidence;
  EXPECT_EQ(binding_of(b, 4).method, "kfd-order") << "GPU 4 has no io_links";
}

TEST_F(mi300a_mapping, io_link_tie_between_cpu_nodes_decides_nothing) {
  for (std::uint32_t i = 0; i < 8; ++i) topo.kfd_nodes.push_back(kfd(i, i >= 4));
  topo.kfd_nodes[6].io_links = {link(6, 0, 2, 20), link(6, 3, 2, 20)};
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 6).method, "kfd-order");
  EXPECT_EQ(binding_of(b, 6).numa_node, 2);
}

TEST_F(mi300x_mapping, pci_sysfs_numa_node_decides_for_a_discrete_gpu) {
  fake_pci pci;
  // BDFID 17920 = 0x4600: bus 0x46, device 0, function 0 (the GPU at KFD node 3).
  pci.device("0000:46:00.0", "1", "");
  const umem::fs_root root(pci.root);
  const auto b = umem::numa::map_gpus_to_numa(topo, &root);
  EXPECT_EQ(binding_of(b, 3).numa_node, 1);
  EXPECT_EQ(binding_of(b, 3).method, "pci-sysfs");
  EXPECT_TRUE(says(binding_of(b, 3), "0000:46:00.0/numa_node")) << binding_of(b, 3).evidence;
  EXPECT_EQ(binding_of(b, 2).method, "none") << "no sysfs entry for 0000:26:00.0";
}

TEST_F(mi300a_mapping, pci_sysfs_local_cpus_decides_when_numa_node_is_minus_one) {
  for (auto* g : topo.gpus()) {  // keep kfd-order out of the way
    agent_at(topo, g->kfd_node).is_apu = false;
    agent_at(topo, g->kfd_node).chip_id = 0;
  }
  fake_pci pci;
  // BDFID 16640 = 0x4100 -> 0000:41:00.0. local_cpus = NUMA node 1's CPUs 24-47 and 120-143 as
  // a 192-bit mask, most significant 32-bit word first.
  pci.device("0000:41:00.0", "-1", "00000000,0000ffff,ff000000,00000000,0000ffff,ff000000");
  // BDFID 33024 = 0x8100 -> 0000:81:00.0: -1 and every CPU, which names no single node.
  pci.device("0000:81:00.0", "-1", "ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff");
  const umem::fs_root root(pci.root);
  const auto b = umem::numa::map_gpus_to_numa(topo, &root);
  EXPECT_EQ(binding_of(b, 5).numa_node, 1);
  EXPECT_EQ(binding_of(b, 5).method, "pci-sysfs");
  EXPECT_FALSE(binding_of(b, 6).numa_node.has_value());
  EXPECT_EQ(binding_of(b, 6).method, "none");
  EXPECT_TRUE(says(binding_of(b, 6), "numa_node -1")) << binding_of(b, 6).evidence;
}

TEST_F(mi300x_mapping, without_evidence_is_not_local_to_any_node) {
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& x : b) {
    SCOPED_TRACE(x.evidence);
    EXPECT_FALSE(x.numa_node.has_value());
    EXPECT_EQ(x.method, "none");
    EXPECT_TRUE(says(x, "NEAREST_CPU"));
    EXPECT_TRUE(says(x, "2 CPU, 4 GPU agents"));
  }
}

TEST_F(mi300a_mapping, discrete_gpus_one_per_cpu_are_not_assumed_local) {
  // The MI300A shape (4 CPU agents, 4 GPU agents, 4 NUMA nodes) but MI300X GPUs: chip 0x74a1,
  // no APU property. One GPU per CPU agent is not enough to assume locality.
  for (auto* g : topo.gpus()) {
    agent_at(topo, g->kfd_node).chip_id = 0x74a1;
    agent_at(topo, g->kfd_node).is_apu.reset();
  }
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  for (const auto& x : b) {
    SCOPED_TRACE(x.evidence);
    EXPECT_EQ(x.method, "none");
    EXPECT_FALSE(x.numa_node.has_value());
    EXPECT_TRUE(says(x, "is not (no APU memory property, chip id 0x74a1)"));
  }
}

TEST_F(mi300a_mapping, cpu_less_numa_node_shifts_the_kfd_translation) {
  // A memory-only node 1 (CXL-like) inserted among the CPU nodes: KFD skips it, so KFD CPU
  // nodes 0,1,2,3 are NUMA nodes 0,2,3,4.
  for (std::size_t i = 1; i < topo.numa.nodes.size(); ++i) topo.numa.nodes[i].os_index += 1;
  umem::numa_node cxl;
  cxl.os_index = 1;
  cxl.memory_total_bytes = 64ull << 30;
  topo.numa.nodes.insert(topo.numa.nodes.begin() + 1, cxl);
  topo.numa.distances.clear();
  agent_at(topo, 7).nearest_cpu_kfd_node = 1;
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 4).numa_node, 0);
  EXPECT_EQ(binding_of(b, 5).numa_node, 2);
  EXPECT_EQ(binding_of(b, 6).numa_node, 3);
  EXPECT_EQ(binding_of(b, 7).numa_node, 2);
  EXPECT_EQ(binding_of(b, 7).method, "rocr-nearest-cpu");
}

TEST_F(mi300a_mapping, nearest_cpu_beyond_the_cpu_nodes_falls_through) {
  agent_at(topo, 4).nearest_cpu_kfd_node = 9;
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 4).method, "kfd-order");
  EXPECT_EQ(binding_of(b, 4).numa_node, 0);
}

TEST_F(mi300a_mapping, without_numa_nodes_identity_is_assumed_and_said) {
  topo.numa = {};
  const auto b = umem::numa::map_gpus_to_numa(topo, nullptr);
  EXPECT_EQ(binding_of(b, 7).numa_node, 3);
  EXPECT_TRUE(says(binding_of(b, 7), "no NUMA nodes known")) << binding_of(b, 7).evidence;
}
