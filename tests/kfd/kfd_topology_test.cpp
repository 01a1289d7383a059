// read_kfd_topology over fake sysfs trees built from real captures, plus the live machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "support/fixtures.hpp"
#include "support/sysfs_tree.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace umem::hsa {
namespace {

constexpr const char* mi300a_capture = "kfd_topology_properties_mi300a_4socket_unidentified_repo.txt";
constexpr const char* mi300x_bank_capture =
    "kfd_mem_banks_rocminfo_contrast_mi300x_cpx_ROCm-ROCm_4750_PARTIAL.txt";
const std::string topo = "/sys/class/kfd/kfd/topology";

umem::error read_error(const fs_root& root, const kfd_scan_options& options = {}) {
  try {
    read_kfd_topology(root, options);
  } catch (const umem::error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return umem::error(errc::internal, "");
}

std::string mem_bank_text(std::uint32_t heap_type, std::uint64_t size) {
  return "heap_type " + std::to_string(heap_type) + "\nsize_in_bytes " + std::to_string(size) +
         "\nflags 0\nwidth 64\nmem_clk_max 5200\n";
}

std::string io_link_text(std::uint32_t type, std::uint32_t from, std::uint32_t to,
                         std::uint32_t weight) {
  return "type " + std::to_string(type) + "\nversion_major 0\nversion_minor 0\nnode_from " +
         std::to_string(from) + "\nnode_to " + std::to_string(to) + "\nweight " +
         std::to_string(weight) + "\nmin_latency 0\nmax_latency 0\nmin_bandwidth 312\n"
         "max_bandwidth 64000\nrecommended_transfer_size 0\nflags 3\n";
}

TEST(KfdTopology, CaptureTreeReadsTheSameNodesAsTheDumpImport) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const std::string text = test::read_text(path);
  const auto blocks = test::kfd_properties_blocks(text);
  ASSERT_EQ(blocks.size(), 8u);
  test::sysfs_tree tree(test::kfd_tree_files(blocks));
  const auto nodes = read_kfd_topology(tree.root());
  ASSERT_EQ(nodes.size(), 8u);
  EXPECT_EQ(nodes, import_kfd_properties_dump(text, path.string()));
  EXPECT_EQ(nodes[3].property("cpu_core_id_base"), 192u);       // capture line 174
  EXPECT_EQ(nodes[5].property("unique_id"), 11940228331418201223u);  // capture line 273
  EXPECT_EQ(nodes[7].property("domain"), 3u);                   // capture line 338
}

TEST(KfdTopology, FallsBackToTheDevicesVirtualPath) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto blocks = test::kfd_properties_blocks(test::read_text(path));
  test::sysfs_tree tree;
  for (const auto& [p, content] : test::kfd_tree_files(blocks))
    tree.write("/sys/devices/virtual/kfd/kfd/topology" + p.substr(topo.size()), content);
  const auto nodes = read_kfd_topology(tree.root());
  ASSERT_EQ(nodes.size(), 8u);
  EXPECT_EQ(nodes[4].property("device_id"), 29856u);  // capture line 219
}

// TEST DOUBLE: no real MI300A mem_banks, io_links, name or gpu_id capture exists. The counts
// follow the real capture (mem_banks_count 1 at lines 77/201, io_links_count 4 at lines 79/203);
// every value inside those files is invented for this test.
TEST(KfdTopology, ReadsNameGpuIdMemBanksAndIoLinks) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto blocks = test::kfd_properties_blocks(test::read_text(path));
  test::sysfs_tree tree(test::kfd_tree_files(blocks));
  for (std::uint32_t n = 0; n < 8; ++n) {
    const std::string dir = topo + "/nodes/" + std::to_string(n);
    const bool gpu = n >= 4;
    const std::uint32_t socket = n % 4;
    tree.write(dir + "/name", gpu ? "gfx942\n" : "\n");
    tree.write(dir + "/gpu_id", gpu ? std::to_string(1000 + n) + "\n" : "0\n");
    tree.write(dir + "/mem_banks/0/properties", mem_bank_text(gpu ? 1 : 0, (100ull + n) << 30));
    std::uint32_t link = 0;
    if (gpu) tree.write(dir + "/io_links/" + std::to_string(link++) + "/properties",
                        io_link_text(11, n, socket, 13));
    for (std::uint32_t peer = 0; peer < 4; ++peer) {
      if (peer == socket) continue;
      const std::uint32_t to = gpu ? 4 + peer : peer;
      tree.write(dir + "/io_links/" + std::to_string(link++) + "/properties",
                 io_link_text(11, n, to, gpu ? 15 : 32));
    }
    if (!gpu) tree.write(dir + "/io_links/3/properties", io_link_text(11, n, 4 + socket, 13));
  }
  const auto nodes = read_kfd_topology(tree.root());
  ASSERT_EQ(nodes.size(), 8u);
  for (const kfd_node& n : nodes) {
    SCOPED_TRACE("node " + std::to_string(n.id));
    EXPECT_EQ(n.name, n.id >= 4 ? "gfx942" : "");
    EXPECT_EQ(n.gpu_id, n.id >= 4 ? 1000u + n.id : 0u);
    ASSERT_EQ(n.mem_banks.size(), n.property("mem_banks_count"));
    EXPECT_EQ(n.mem_banks[0], (kfd_mem_bank{n.id >= 4 ? 1u : 0u, (100ull + n.id) << 30, 0, 64, 5200}));
    ASSERT_EQ(n.io_links.size(), n.property("io_links_count"));
    for (const kfd_io_link& l : n.io_links) {
      EXPECT_EQ(l.node_from, n.id);
      EXPECT_EQ(l.type, 11u);
      EXPECT_EQ(l.min_bandwidth, 312u);
      EXPECT_EQ(l.max_bandwidth, 64000u);
      EXPECT_EQ(l.flags, 3u);
    }
    // The CPU-GPU link of one socket (weight 13 in this double) goes to the same socket.
    const auto local = std::find_if(n.io_links.begin(), n.io_links.end(),
                                    [](const kfd_io_link& l) { return l.weight == 13; });
    ASSERT_NE(local, n.io_links.end());
    EXPECT_EQ(local->node_to, n.id >= 4 ? n.id - 4 : n.id + 4);
  }
}

// Real: the MI300X mem_banks/0/properties text, verbatim from lines 4-8 of the capture.
TEST(KfdTopology, RealMi300xMemBank) {
  UMEM_REQUIRE_FIXTURE(path, mi300x_bank_capture);
  std::istringstream in(test::read_text(path));
  std::string line, bank_text;
  while (std::getline(in, line) && line.rfind("$ cat ", 0) != 0) {}
  while (std::getline(in, line) && !line.empty()) bank_text += line + "\n";
  ASSERT_EQ(bank_text.substr(0, 12), "heap_type 1\n");
  test::sysfs_tree tree;
  // TEST DOUBLE node properties (that capture has none): 38 CUs x 4 SIMDs, rocminfo lines 36-37.
  tree.write(topo + "/nodes/3/properties", "cpu_cores_count 0\nsimd_count 152\n");
  tree.write(topo + "/nodes/3/mem_banks/0/properties", bank_text);
  const auto nodes = read_kfd_topology(tree.root());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].id, 3u);
  ASSERT_EQ(nodes[0].mem_banks.size(), 1u);
  const kfd_mem_bank& b = nodes[0].mem_banks[0];
  EXPECT_EQ(b.heap_type, 1u);                   // line 4: FRAME_BUFFER_PUBLIC
  EXPECT_EQ(b.size_bytes, 25767706624u);        // line 5
  EXPECT_EQ(b.flags, 0u);                       // line 6
  EXPECT_EQ(b.width, 8192u);                    // line 7
  EXPECT_EQ(b.mem_clk_max, 1300u);              // line 8
  EXPECT_EQ(b.size_bytes / 1024, 25163776u);    // = the GPU pool size in KB, line 65
}

TEST(KfdTopology, EntriesAreReadInNumericOrder) {
  test::sysfs_tree tree;
  for (std::uint32_t n : {0u, 2u, 10u}) {
    const std::string dir = topo + "/nodes/" + std::to_string(n);
    tree.write(dir + "/properties", "cpu_cores_count 1\nsimd_count 0\n");
    for (std::uint32_t l : {0u, 1u, 10u, 2u})
      tree.write(dir + "/io_links/" + std::to_string(l) + "/properties", io_link_text(2, n, l, 20));
  }
  const auto nodes = read_kfd_topology(tree.root());
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].id, 0u);
  EXPECT_EQ(nodes[1].id, 2u);
  EXPECT_EQ(nodes[2].id, 10u);
  ASSERT_EQ(nodes[2].io_links.size(), 4u);
  EXPECT_EQ(nodes[2].io_links[2].node_to, 2u);
  EXPECT_EQ(nodes[2].io_links[3].node_to, 10u);
}

TEST(KfdTopology, AbsentKfdIsEmpty) {
  test::sysfs_tree tree({{"/proc/meminfo", "MemTotal: 1 kB\n"}});
  EXPECT_TRUE(read_kfd_topology(tree.root()).empty());
  tree.make_dir(topo + "/nodes");
  EXPECT_TRUE(read_kfd_topology(tree.root()).empty());
}

TEST(KfdTopology, RescansWhenGenerationChangesDuringAScan) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto blocks = test::kfd_properties_blocks(test::read_text(path));
  test::sysfs_tree tree(test::kfd_tree_files(blocks, 7));
  int passes = 0;
  kfd_scan_options options;
  options.after_pass = [&](int attempt) {
    ++passes;
    if (attempt == 0) {  // a GPU is removed while the first pass runs
      tree.remove(topo + "/nodes/7");
      tree.write(topo + "/generation_id", "8\n");
    }
  };
  const auto nodes = read_kfd_topology(tree.root(), options);
  EXPECT_EQ(passes, 2);
  EXPECT_EQ(nodes.size(), 7u) << "the result is the second, consistent pass";
}

TEST(KfdTopology, MissingFileDuringChangingScanIsRetried) {
  test::sysfs_tree tree({{topo + "/generation_id", "1\n"},
                         {topo + "/nodes/0/properties", "cpu_cores_count 48\nsimd_count 0\n"}});
  tree.make_dir(topo + "/nodes/1");  // listed, properties not yet written: a node appearing
  kfd_scan_options options;
  options.after_pass = [&](int attempt) {
    if (attempt > 0) return;
    tree.write(topo + "/nodes/1/properties", "cpu_cores_count 0\nsimd_count 912\n");
    tree.write(topo + "/generation_id", "2\n");
  };
  const auto nodes = read_kfd_topology(tree.root(), options);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[1].is_gpu());
}

TEST(KfdTopology, GenerationThatNeverSettlesIsAnError) {
  test::sysfs_tree tree({{topo + "/generation_id", "1\n"},
                         {topo + "/nodes/0/properties", "cpu_cores_count 48\nsimd_count 0\n"}});
  int passes = 0;
  kfd_scan_options options;
  options.max_attempts = 3;
  options.after_pass = [&](int) { tree.write(topo + "/generation_id", std::to_string(++passes + 1)); };
  const umem::error e = read_error(tree.root(), options);
  EXPECT_EQ(e.code(), errc::io_error);
  EXPECT_EQ(passes, 3);
  EXPECT_NE(std::string(e.what()).find("3 scans"), std::string::npos) << e.what();
}

TEST(KfdTopology, IncompleteTreeIsAnErrorNamingTheFile) {
  test::sysfs_tree tree({{topo + "/nodes/0/properties", "cpu_cores_count 48\nsimd_count 0\n"}});
  tree.make_dir(topo + "/nodes/0/mem_banks/0");
  const umem::error e = read_error(tree.root());
  EXPECT_EQ(e.code(), errc::parse_error);
  EXPECT_NE(std::string(e.what()).find(topo + "/nodes/0/mem_banks/0/properties is missing"),
            std::string::npos) << e.what();
}

TEST(KfdTopology, MalformedFilesAreParseErrorsNamingFileAndLine) {
  struct bad_case {
    std::string file, content, needle;
  };
  const std::string node = topo + "/nodes/2";
  const bad_case cases[] = {
      {node + "/properties", "cpu_cores_count 48\nsimd_count 0\ncaches_count many\n",
       node + "/properties:3:"},
      {node + "/properties", "cpu_cores_count 48\n", "no 'simd_count' line"},
      {node + "/gpu_id", "gpu7\n", node + "/gpu_id:1:"},
      {node + "/name", "gfx\x95\x9a" "942\n", node + "/name: the node name is not UTF-8"},
      {topo + "/generation_id", "x\n", topo + "/generation_id:1:"},
      {node + "/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 4096\n",
       node + "/mem_banks/0/properties: no 'flags' line"},
      {node + "/io_links/0/properties", io_link_text(11, 2, 0, 4294967295u) + "extra\n",
       node + "/io_links/0/properties:13:"},
  };
  for (const bad_case& c : cases) {
    SCOPED_TRACE(c.file);
    test::sysfs_tree tree({{node + "/properties", "cpu_cores_count 48\nsimd_count 0\n"}});
    tree.write(c.file, c.content);
    const umem::error e = read_error(tree.root());
    EXPECT_EQ(e.code(), errc::parse_error);
    EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
  }
}

TEST(KfdTopology, IoLinkValueBeyond32BitsIsAnError) {
  test::sysfs_tree tree({{topo + "/nodes/0/properties", "cpu_cores_count 48\nsimd_count 0\n"}});
  tree.write(topo + "/nodes/0/io_links/0/properties",
             "type 11\nnode_from 0\nnode_to 1\nweight 4294967296\nmin_bandwidth 0\n"
             "max_bandwidth 0\nflags 0\n");
  const umem::error e = read_error(tree.root());
  EXPECT_EQ(e.code(), errc::parse_error);
  EXPECT_NE(std::string(e.what()).find("weight 4294967296"), std::string::npos) << e.what();
}

TEST(KfdTopology, LiveMachine) {
  const auto nodes = read_kfd_topology(fs_root("/"));
  if (std::filesystem::exists("/sys/class/kfd/kfd/topology/nodes")) {
    EXPECT_FALSE(nodes.empty()) << "this machine has a KFD topology";
  } else {
    EXPECT_TRUE(nodes.empty()) << "no /sys/class/kfd here, so no KFD nodes";
  }
}

}  // namespace
}  // namespace umem::hsa
