// Placement resolution, spill order and the text forms of placement/spill/populate.
#include "umem/allocator/placement_resolver.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"

namespace {

using namespace umem::alloc;
using umem::topology;

// The message of the umem::error(invalid_argument) that `fn` throws ("" if none or another code).
template <class F>
std::string invalid_argument_of(F fn) {
  try {
    fn();
  } catch (const umem::error& e) {
    return e.code() == umem::errc::invalid_argument ? e.what() : "wrong code: " + std::string(e.what());
  }
  return "";
}

umem::numa_topology numa_of(const std::vector<std::vector<std::uint32_t>>& distances,
                            std::vector<int> os_indices = {}) {
  umem::numa_topology numa;
  for (std::size_t i = 0; i < distances.size(); ++i)
    numa.nodes.push_back({os_indices.empty() ? static_cast<int>(i) : os_indices[i], {}, 0, {}, {}});
  numa.distances = distances;
  return numa;
}

const std::vector<std::vector<std::uint32_t>> slit_10_32 = {
    {10, 32, 32, 32}, {32, 10, 32, 32}, {32, 32, 10, 32}, {32, 32, 32, 10}};

// Four GPUs (KFD nodes 4-7) bound to NUMA nodes 0-3, as on a 4-socket MI300A, built by hand so
// each binding's fields can be varied.
topology four_apus() {
  topology t;
  t.numa = numa_of(slit_10_32);
  for (std::uint32_t i = 0; i < 4; ++i) {
    umem::agent gpu;
    gpu.kind = umem::agent_kind::gpu;
    gpu.kfd_node = 4 + i;
    t.agents.push_back(gpu);
    t.gpu_numa.push_back({4 + i, static_cast<int>(i), "kfd-order", "test"});
  }
  return t;
}

// rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt: GPU agents at KFD nodes 4-7
// (lines 293, 397, 501, 605), all APUs; numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt:
// 4 nodes, distances 10 local / 32 remote (lines 16-21). The GPU->NUMA mapping of the numa layer
// places GPU i on node i, as rocm-smi --showtopo of a 4-socket MI300A says (fixtures README).
class mi300a_capture : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt");
    UMEM_REQUIRE_FIXTURE(numactl, "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt");
    topo = umem::importers::import_rocminfo(umem::test::read_text(rocminfo), rocminfo.string()).topo;
    topo.numa =
        umem::importers::import_numactl(umem::test::read_text(numactl), numactl.string()).numa;
    topo.gpu_numa = umem::numa::map_gpus_to_numa(topo, nullptr);
    ASSERT_EQ(topo.gpus().size(), 4u);
    ASSERT_EQ(topo.numa.nodes.size(), 4u);
  }
  topology topo;
};

TEST_F(mi300a_capture, device_d_resolves_to_numa_node_d) {
  for (int d = 0; d < 4; ++d)
    EXPECT_EQ(resolve_placement({placement_kind::device, d, {}}, spill_policy::never, topo, 0)
                  .binding,
              (node_binding{bind_mode::bind, {d}}));
}

TEST_F(mi300a_capture, spill_order_on_the_10_32_matrix_is_the_other_nodes_by_index) {
  EXPECT_EQ(spill_order(0, topo.numa), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(spill_order(2, topo.numa), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(spill_order(3, topo.numa), (std::vector<int>{0, 1, 2}));
}

TEST(spill_order, follows_distance_then_index_on_an_uneven_matrix) {
  // Two pairs of close sockets (12), far otherwise (21, 31).
  const auto numa =
      numa_of({{10, 21, 12, 31}, {21, 10, 31, 12}, {12, 31, 10, 21}, {31, 12, 21, 10}});
  EXPECT_EQ(spill_order(0, numa), (std::vector<int>{2, 1, 3}));
  EXPECT_EQ(spill_order(1, numa), (std::vector<int>{3, 0, 2}));
  EXPECT_EQ(spill_order(3, numa), (std::vector<int>{1, 2, 0}));
  // Ties broken by os_index, which need not be contiguous.
  const auto sparse = numa_of({{10, 20, 15, 20}, {20, 10, 20, 20}, {15, 20, 10, 20},
                               {20, 20, 20, 10}},
                              {0, 2, 4, 6});
  EXPECT_EQ(spill_order(0, sparse), (std::vector<int>{4, 2, 6}));
  EXPECT_EQ(spill_order(6, sparse), (std::vector<int>{0, 2, 4}));
}

TEST(spill_order, unknown_distances_give_ascending_index_and_unknown_nodes_are_errors) {
  auto numa = numa_of({{10, 32, 32}, {32, 10, 32}, {32, 32, 10}});
  numa.distances.clear();
  EXPECT_EQ(spill_order(1, numa), (std::vector<int>{0, 2}));
  EXPECT_EQ(spill_order(0, numa_of({{10}})), std::vector<int>{});
  EXPECT_EQ(invalid_argument_of([&] { spill_order(5, numa); }),
            "spill order: NUMA node 5 does not exist; the topology has nodes 0-2");
}

TEST(resolve_placement, local_node_and_interleave) {
  const topology t = four_apus();
  EXPECT_EQ(resolve_placement({}, spill_policy::never, t, 2).binding,
            (node_binding{bind_mode::bind, {2}}));
  EXPECT_EQ(resolve_placement({placement_kind::node, 3, {}}, spill_policy::never, t, 0).binding,
            (node_binding{bind_mode::bind, {3}}));
  EXPECT_EQ(resolve_placement(parse_placement("interleave:all"), spill_policy::never, t, 0).binding,
            (node_binding{bind_mode::interleave, {0, 1, 2, 3}}));
  EXPECT_EQ(resolve_placement(parse_placement("interleave:2,0"), spill_policy::never, t, 0).binding,
            (node_binding{bind_mode::interleave, {0, 2}}));
}

TEST(resolve_placement, local_uses_the_calling_threads_node_on_this_machine) {
  // This build machine has one NUMA node (0): the calling thread always runs on it.
  topology t;
  t.numa = numa_of({{10}});
  EXPECT_EQ(resolve_placement({}, spill_policy::never, t).binding,
            (node_binding{bind_mode::bind, {0}}));
}

TEST(resolve_placement, spill_nodes_only_for_warn_and_allow_and_never_for_interleave) {
  const topology t = four_apus();
  const placement node1{placement_kind::node, 1, {}};
  EXPECT_EQ(resolve_placement(node1, spill_policy::never, t, 0).spill_nodes, std::vector<int>{});
  EXPECT_EQ(resolve_placement(node1, spill_policy::warn, t, 0).spill_nodes,
            (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(resolve_placement(node1, spill_policy::allow, t, 0).spill_nodes,
            (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(resolve_placement(parse_placement("interleave:all"), spill_policy::warn, t, 0)
                .spill_nodes,
            std::vector<int>{});
}

TEST(resolve_placement, errors_name_the_placement_and_what_exists) {
  topology t = four_apus();
  const auto err = [&](const char* text, int calling_node = 0) {
    return invalid_argument_of(
        [&] { resolve_placement(parse_placement(text), spill_policy::never, t, calling_node); });
  };
  EXPECT_EQ(err("node:7"),
            "placement 'node:7': NUMA node 7 does not exist; the topology has nodes 0-3");
  EXPECT_EQ(err("local", 5),
            "placement 'local': the calling thread runs on NUMA node 5, which does not exist; the "
            "topology has nodes 0-3 (is the topology another machine's?)");
  EXPECT_EQ(err("interleave:1,5"),
            "placement 'interleave:1,5': the set names NUMA node 5, which does not exist; the "
            "topology has nodes 0-3");
  EXPECT_EQ(err("device:4"), "placement 'device:4': the topology has 4 GPU(s): device:0-3");

  t.gpu_numa[1].numa_node.reset();
  t.gpu_numa[1].method = "none";
  t.gpu_numa[1].evidence = "no NEAREST_CPU, no io_link, no PCI sysfs";
  EXPECT_EQ(err("device:1"),
            "placement 'device:1': GPU 1 (KFD node 5) is not local to any NUMA node (method "
            "none: no NEAREST_CPU, no io_link, no PCI sysfs); use node:N instead");
  t.gpu_numa[2].numa_node = 9;
  EXPECT_EQ(err("device:2"),
            "placement 'device:2': GPU 2 (KFD node 6) is bound (kfd-order) to NUMA node 9, which "
            "does not exist; the topology has nodes 0-3");
  t.gpu_numa.pop_back();
  EXPECT_EQ(err("device:3"),
            "placement 'device:3': GPU 3 (KFD node 7) has no GPU->NUMA binding in the topology; "
            "map GPUs to NUMA nodes first (umem::numa::map_gpus_to_numa)");

  t.agents.resize(1);
  EXPECT_EQ(err("device:1"), "placement 'device:1': the topology has 1 GPU(s): device:0");
  t.agents.clear();
  EXPECT_EQ(err("device:0"), "placement 'device:0': the topology has no GPU");
  t.numa = {};
  EXPECT_EQ(err("node:0"), "placement 'node:0': the topology has no NUMA nodes; cannot place memory");
  EXPECT_EQ(err("interleave:all"),
            "placement 'interleave:all': the topology has no NUMA nodes; cannot place memory");
}

TEST(placement_text, canonical_forms_round_trip) {
  for (const char* s : {"local", "node:0", "node:2", "device:0", "device:3", "interleave:all",
                        "interleave:0-3", "interleave:0,2", "interleave:0-2,5", "interleave:7"})
    EXPECT_EQ(to_string(parse_placement(s)), s);
}

TEST(placement_text, parse_gives_the_values_and_to_string_normalizes) {
  EXPECT_EQ(parse_placement("local"), placement{});
  EXPECT_EQ(parse_placement("node:2"), (placement{placement_kind::node, 2, {}}));
  EXPECT_EQ(parse_placement("device:0"), (placement{placement_kind::device, 0, {}}));
  EXPECT_EQ(parse_placement("interleave:all"), (placement{placement_kind::interleave, -1, {}}));
  EXPECT_EQ(parse_placement("interleave:0-3").nodes, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_placement("interleave:5,0-1").nodes, (std::vector<int>{0, 1, 5}));
  EXPECT_EQ(to_string(parse_placement("interleave:3,0-2")), "interleave:0-3");
  EXPECT_EQ(to_string(parse_placement("interleave:0,1")), "interleave:0-1");
  EXPECT_EQ(to_string(parse_placement("interleave:2-2")), "interleave:2");
  EXPECT_EQ(to_string(parse_placement("node:007")), "node:7");
  EXPECT_EQ(format_node_set({}), "");
}

TEST(placement_text, every_parse_error_says_what_is_wrong) {
  const auto err = [](const char* text) {
    return invalid_argument_of([&] { parse_placement(text); });
  };
  const std::string kinds = "; expected local, node:N, device:D or interleave:SET";
  for (const char* s : {"node:x", "node:-1", "node:+1", "node: 1", "node:1x", "node:",
                        "node:99999999999"})
    EXPECT_EQ(err(s), "placement '" + std::string(s) + "': N must be a non-negative integer");
  EXPECT_EQ(err("device:x"), "placement 'device:x': D must be a non-negative integer");
  EXPECT_EQ(err("node"), "placement 'node': node needs an index, e.g. node:0");
  EXPECT_EQ(err("device"), "placement 'device': device needs an index, e.g. device:0");
  EXPECT_EQ(err("local:1"), "placement 'local:1': local takes no argument");
  EXPECT_EQ(err("interleave"),
            "placement 'interleave': interleave needs a node set, e.g. interleave:0-3 or "
            "interleave:all");
  EXPECT_EQ(err("interleave:"),
            "placement 'interleave:': SET is empty; write all, a list like 0,2 or a range like 0-3");
  EXPECT_EQ(err("interleave:0,,2"),
            "placement 'interleave:0,,2': empty item in the node set; write e.g. 0-3 or 0,2");
  EXPECT_EQ(err("interleave:0,"),
            "placement 'interleave:0,': empty item in the node set; write e.g. 0-3 or 0,2");
  for (const char* item : {"a-3", "1-", "-1", "ALL", "1-2-3", "0..3"})
    EXPECT_EQ(err(("interleave:" + std::string(item)).c_str()),
              "placement 'interleave:" + std::string(item) + "': '" + item +
                  "' is not a node (N) or a range (A-B) of non-negative integers");
  EXPECT_EQ(err("interleave:3-1"), "placement 'interleave:3-1': range 3-1 is reversed; write 1-3");
  EXPECT_EQ(err("interleave:0-3,2"), "placement 'interleave:0-3,2': node 2 is listed twice");
  EXPECT_EQ(err("interleave:0-5000"),
            "placement 'interleave:0-5000': node 5000 is beyond any machine (at most 4095)");
  EXPECT_EQ(err("socket:1"), "placement 'socket:1': unknown kind 'socket'" + kinds);
  EXPECT_EQ(err("Node:1"), "placement 'Node:1': unknown kind 'Node'" + kinds);
  EXPECT_EQ(err(""), "placement '': unknown kind ''" + kinds);
}

TEST(policy_text, spill_and_populate_round_trip_and_reject_the_rest) {
  for (auto s : {spill_policy::never, spill_policy::warn, spill_policy::allow})
    EXPECT_EQ(parse_spill_policy(to_string(s)), s);
  for (auto m : {populate_mode::none, populate_mode::touch, populate_mode::map_populate})
    EXPECT_EQ(parse_populate_mode(to_string(m)), m);
  EXPECT_STREQ(to_string(spill_policy::warn), "warn");
  EXPECT_STREQ(to_string(populate_mode::map_populate), "map_populate");
  EXPECT_STREQ(to_string(bind_mode::interleave), "interleave");
  EXPECT_EQ(invalid_argument_of([] { parse_spill_policy("Warn"); }),
            "spill policy 'Warn': expected never, warn or allow");
  EXPECT_EQ(invalid_argument_of([] { parse_populate_mode("populate"); }),
            "populate mode 'populate': expected none, touch or map_populate");
  EXPECT_EQ(invalid_argument_of([] { parse_populate_mode(""); }),
            "populate mode '': expected none, touch or map_populate");
}

}  // namespace
