// load_hwloc_xml against a real hwloc export and a small hand-written one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<unsigned> range(unsigned first, unsigned last) {
  std::vector<unsigned> v(last - first + 1);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<unsigned> join(std::vector<unsigned> a, const std::vector<unsigned>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A scratch directory removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("umem_numa_xml_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return path / name;
  }
};

constexpr const char* tioga = "hwloc_contrast_mi250x_tioga_hpe_crayex235a_llnl-mpibind.xml";

}  // namespace

TEST(hwloc_xml, tioga_numa_nodes_cpus_memory_and_package) {
  UMEM_REQUIRE_FIXTURE(xml, tioga);
  const umem::numa_topology t = umem::numa::load_hwloc_xml(xml);
  ASSERT_EQ(t.nodes.size(), 4u);
  // NUMANode objects at lines 35, 713, 1012, 1311: cpusets "0x0000ffff,,0x0000ffff",
  // "0xffff0000,,0xffff0000", "0x0000ffff,,0x0000ffff,0x0", "0xffff0000,,0xffff0000,0x0"
  // (the PU objects under each agree), local_memory as written there.
  const std::vector<std::vector<unsigned>> cpus = {
      join(range(0, 15), range(64, 79)), join(range(16, 31), range(80, 95)),
      join(range(32, 47), range(96, 111)), join(range(48, 63), range(112, 127))};
  const std::uint64_t memory[] = {134683746304u, 135281889280u, 135281889280u, 135263215616u};
  for (int i = 0; i < 4; ++i) {
    const auto& n = t.nodes[static_cast<std::size_t>(i)];
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_EQ(n.os_index, i);
    EXPECT_EQ(n.cpus, cpus[static_cast<std::size_t>(i)]);
    EXPECT_EQ(n.memory_total_bytes, memory[i]);
    // One Package, os_index 0 (line 28), holds all four nodes (1x EPYC 7A53).
    EXPECT_EQ(n.package, 0);
    // An export carries no free-memory figure.
    EXPECT_FALSE(n.memory_free_bytes.has_value());
  }
}

TEST(hwloc_xml, tioga_distances_are_the_numa_latency_matrix) {
  UMEM_REQUIRE_FIXTURE(xml, tioga);
  // Lines 1620-1624: distances2 NUMANode kind="5" (FROM_OS|MEANS_LATENCY) "NUMALatency",
  // values 10 on the diagonal and 12 elsewhere (the .SOURCE.txt says 10/12). The XGMI matrices
  // that follow are between OS devices and must not be taken.
  const auto t = umem::numa::load_hwloc_xml(xml);
  const std::vector<std::vector<std::uint32_t>> expected = {
      {10, 12, 12, 12}, {12, 10, 12, 12}, {12, 12, 10, 12}, {12, 12, 12, 10}};
  EXPECT_EQ(t.distances, expected);
}

// Two packages; package 1 holds a CPU node (1) and a memory-only node (2) with the same
// locality; node 3 is memory-only and hangs from the Machine. The distance matrix lists the
// nodes in the order 3 0 1 2, which the loader must re-index to ascending os_index.
constexpr const char* memory_only_xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" allowed_cpuset="0x0000000f" nodeset="0x0000000f" complete_nodeset="0x0000000f" allowed_nodeset="0x0000000f" gp_index="1">
    <object type="NUMANode" os_index="3" cpuset="0x0000000f" complete_cpuset="0x0000000f" nodeset="0x00000008" complete_nodeset="0x00000008" gp_index="2" local_memory="4000000000"/>
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4" local_memory="1000000000"/>
      <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5"/>
      <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000006" complete_nodeset="0x00000006" gp_index="7">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000002" complete_nodeset="0x00000002" gp_index="8" local_memory="1000000000"/>
      <object type="NUMANode" os_index="2" cpuset="0x0000000c" complete_cpuset="0x0000000c" nodeset="0x00000004" complete_nodeset="0x00000004" gp_index="9" local_memory="2000000000"/>
      <object type="PU" os_index="2" cpuset="0x00000004" complete_cpuset="0x00000004" nodeset="0x00000006" complete_nodeset="0x00000006" gp_index="10"/>
      <object type="PU" os_index="3" cpuset="0x00000008" complete_cpuset="0x00000008" nodeset="0x00000006" complete_nodeset="0x00000006" gp_index="11"/>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="4" kind="5" name="NUMALatency" indexing="os">
    <indexes length="8">3 0 1 2 </indexes>
    <u64values length="48">10 40 40 40 40 10 20 30 40 20 10 25 40 30 25 10 </u64values>
  </distances2>
</topology>
)";

TEST(hwloc_xml, memory_only_nodes_own_no_cpus) {
  temp_dir dir;
  const auto t = umem::numa::load_hwloc_xml(dir.write("memory_only.xml", memory_only_xml));
  ASSERT_EQ(t.nodes.size(), 4u);
  EXPECT_EQ(t.nodes[0].cpus, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(t.nodes[1].cpus, (std::vector<unsigned>{2, 3}));
  EXPECT_TRUE(t.nodes[2].cpus.empty()) << "shares package 1's locality with node 1";
  EXPECT_TRUE(t.nodes[3].cpus.empty()) << "hangs from the Machine";
  EXPECT_EQ(t.nodes[0].package, 0);
  EXPECT_EQ(t.nodes[1].package, 1);
  EXPECT_EQ(t.nodes[2].package, 1);
  EXPECT_FALSE(t.nodes[3].package.has_value());
  EXPECT_EQ(t.nodes[2].memory_total_bytes, 2000000000u);
  EXPECT_EQ(t.nodes[3].memory_total_bytes, 4000000000u);
  const std::vector<std::vector<std::uint32_t>> expected = {
      {10, 20, 30, 40}, {20, 10, 25, 40}, {30, 25, 10, 40}, {40, 40, 40, 10}};
  EXPECT_EQ(t.distances, expected);
}

TEST(hwloc_xml, missing_file_is_not_found_naming_the_path) {
  const fs::path missing = fs::temp_directory_path() / "umem_numa_no_such_topology.xml";
  try {
    umem::numa::load_hwloc_xml(missing);
    FAIL() << "expected umem::error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::not_found);
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
}

TEST(hwloc_xml, garbage_is_a_parse_error_naming_the_path) {
  temp_dir dir;
  for (const char* text : {"this is not XML\n", "", "<?xml version=\"1.0\"?>\n<topology>\n"}) {
    SCOPED_TRACE(text);
    const fs::path p = dir.write("garbage.xml", text);
    try {
      umem::numa::load_hwloc_xml(p);
      FAIL() << "expected umem::error";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), umem::errc::parse_error);
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
}
