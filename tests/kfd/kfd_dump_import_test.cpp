// import_kfd_properties_dump against the real 4-socket MI300A capture
// (kfd_topology_properties_mi300a_4socket_unidentified_repo.txt). Line numbers in comments are
// the capture file's own lines.
#include <gtest/gtest.h>

#include <sstream>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace umem::hsa {
namespace {

constexpr const char* mi300a_capture = "kfd_topology_properties_mi300a_4socket_unidentified_repo.txt";
constexpr std::uint64_t svmapi_supported = 1ull << 27;        // HSA_CAP_SVMAPI_SUPPORTED
constexpr std::uint64_t coherent_host_access = 1ull << 28;    // HSA_CAP_FLAGS_COHERENTHOSTACCESS

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

std::string error_of(const std::string& text, const std::string& origin) {
  try {
    import_kfd_properties_dump(text, origin);
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::parse_error);
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

TEST(KfdDumpImport, RealMi300aCaptureHasEightNodes) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto nodes = import_kfd_properties_dump(test::read_text(path), path.string());
  // Eight blocks between the separators at lines 74, 105, 136, 167, 198, 237, 276, 315, 354.
  ASSERT_EQ(nodes.size(), 8u);
  for (std::uint32_t i = 0; i < 8; ++i) {
    EXPECT_EQ(nodes[i].id, i);
    EXPECT_TRUE(nodes[i].name.empty()) << "the dump has no name files";
    EXPECT_EQ(nodes[i].gpu_id, 0u) << "the dump has no gpu_id files";
    EXPECT_TRUE(nodes[i].mem_banks.empty());
    EXPECT_TRUE(nodes[i].io_links.empty());
  }
}

TEST(KfdDumpImport, RealMi300aCpuNodes) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto nodes = import_kfd_properties_dump(test::read_text(path), path.string());
  ASSERT_EQ(nodes.size(), 8u);
  const std::uint64_t core_id_base[4] = {0, 64, 128, 192};  // lines 81, 112, 143, 174
  for (std::uint32_t i = 0; i < 4; ++i) {
    const kfd_node& n = nodes[i];
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_FALSE(n.is_gpu());
    EXPECT_EQ(n.properties.size(), 30u);  // lines 75-104 of node 0: 30 keys, no capability
    EXPECT_EQ(n.property("simd_count"), 0u);         // line 76
    EXPECT_EQ(n.property("cpu_cores_count"), 48u);   // line 75
    EXPECT_EQ(n.property("mem_banks_count"), 1u);    // line 77
    EXPECT_EQ(n.property("io_links_count"), 4u);     // line 79
    EXPECT_EQ(n.property("p2p_links_count"), 3u);    // line 80
    EXPECT_EQ(n.property("cpu_core_id_base"), core_id_base[i]);
    EXPECT_EQ(n.property("hive_id"), 9034655720432782706u);  // line 99
    EXPECT_EQ(n.property("max_engine_clk_ccompute"), 3700u);  // line 104
    EXPECT_FALSE(n.property("capability").has_value());
    EXPECT_FALSE(n.property("num_xcc").has_value());
  }
}

TEST(KfdDumpImport, RealMi300aGpuNodes) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  const auto nodes = import_kfd_properties_dump(test::read_text(path), path.string());
  ASSERT_EQ(nodes.size(), 8u);
  // Per GPU node 4..7: domain (lines 221, 260, 299, 338), drm_render_minor (222, 261, 300, 339),
  // unique_id (234, 273, 312, 351), simd_id_base (206, 245, 284, 323).
  const std::uint64_t domain[4] = {0, 1, 2, 3};
  const std::uint64_t render_minor[4] = {128, 136, 144, 152};
  const std::uint64_t unique_id[4] = {7843934696581995200u, 11940228331418201223u,
                                      7304659965365223271u, 6885922256455814113u};
  const std::uint64_t simd_id_base[4] = {2147487744u, 2147487784u, 2147487824u, 2147487864u};
  for (std::uint32_t i = 0; i < 4; ++i) {
    const kfd_node& n = nodes[4 + i];
    SCOPED_TRACE("node " + std::to_string(4 + i));
    EXPECT_TRUE(n.is_gpu());
    EXPECT_EQ(n.properties.size(), 38u);                   // lines 199-236 of node 4
    EXPECT_EQ(n.property("cpu_cores_count"), 0u);          // line 199
    EXPECT_EQ(n.property("simd_count"), 912u);             // line 200
    EXPECT_EQ(n.property("simd_per_cu"), 4u);              // line 215
    EXPECT_EQ(*n.property("simd_count") / *n.property("simd_per_cu"), 228u);  // 228 CUs
    EXPECT_EQ(n.property("gfx_target_version"), 90402u);   // line 217: gfx942
    EXPECT_EQ(n.property("vendor_id"), 0x1002u);           // line 218: 4098
    EXPECT_EQ(n.property("device_id"), 0x74a0u);           // line 219: 29856, MI300A
    EXPECT_EQ(n.property("location_id"), 512u);            // line 220: bus 02, dev 0, fn 0
    EXPECT_EQ(n.property("num_xcc"), 6u);                  // line 235
    EXPECT_EQ(n.property("local_mem_size"), 0u);           // line 229
    EXPECT_EQ(n.property("capability"), 1013424768u);      // line 231
    EXPECT_EQ(n.property("domain"), domain[i]);
    EXPECT_EQ(n.property("drm_render_minor"), render_minor[i]);
    EXPECT_EQ(n.property("unique_id"), unique_id[i]);
    EXPECT_EQ(n.property("simd_id_base"), simd_id_base[i]);
    const std::uint64_t cap = n.property("capability").value_or(0);
    EXPECT_NE(cap & svmapi_supported, 0u) << "1013424768 = 0x3c67a280 has bit 27";
    EXPECT_NE(cap & coherent_host_access, 0u) << "1013424768 = 0x3c67a280 has bit 28";
  }
}

TEST(KfdDumpImport, UnrecognizedLineInsideDumpNamesItsLine) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  auto lines = lines_of(test::read_text(path));
  ASSERT_EQ(lines[147], "num_gws 0");  // line 148, node 2
  lines[147] = "num_gws zero";
  EXPECT_NE(error_of(join_lines(lines), "cap.txt").find("cap.txt:148:"), std::string::npos);
}

TEST(KfdDumpImport, TrailingShellOutputIsAnErrorNotIgnored) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  auto lines = lines_of(test::read_text(path));
  ASSERT_EQ(lines.size(), 354u);
  lines.push_back("user@host:~> exit");
  EXPECT_NE(error_of(join_lines(lines), "cap.txt").find("cap.txt:355:"), std::string::npos);
}

TEST(KfdDumpImport, TruncatedBlockIsRejected) {
  UMEM_REQUIRE_FIXTURE(path, mi300a_capture);
  auto lines = lines_of(test::read_text(path));
  ASSERT_EQ(lines[199], "simd_count 912");  // line 200, node 4
  lines.erase(lines.begin() + 199);
  const std::string msg = error_of(join_lines(lines), "cap.txt");
  EXPECT_NE(msg.find("cap.txt:199"), std::string::npos) << msg;  // the block's first line
  EXPECT_NE(msg.find("simd_count"), std::string::npos) << msg;
}

TEST(KfdDumpImport, MemBankCaptureIsNotANodeDump) {
  UMEM_REQUIRE_FIXTURE(path, "kfd_mem_banks_rocminfo_contrast_mi300x_cpx_ROCm-ROCm_4750_PARTIAL.txt");
  // Line 3 is "$ cat .../nodes/3/mem_banks/0/properties": neither a node-properties command nor
  // a "key value" line.
  EXPECT_NE(error_of(test::read_text(path), "x.txt").find("x.txt:3:"), std::string::npos);
}

TEST(KfdDumpImport, PlainConcatenationFollowsShellGlobOrder) {
  // Twelve concatenated files without separators: cat nodes/*/properties visits
  // 0, 1, 10, 11, 2, ..., 9, so the third file is node 10's.
  std::string dump;
  for (int block = 0; block < 12; ++block)
    dump += "cpu_cores_count 1\nsimd_count 0\ncpu_core_id_base " + std::to_string(block) + "\n";
  const auto nodes = import_kfd_properties_dump(dump, "plain");
  ASSERT_EQ(nodes.size(), 12u);
  const std::uint64_t block_of_node[12] = {0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 2, 3};
  for (std::uint32_t id = 0; id < 12; ++id) {
    EXPECT_EQ(nodes[id].id, id);
    EXPECT_EQ(nodes[id].property("cpu_core_id_base"), block_of_node[id]) << "node " << id;
  }
}

TEST(KfdDumpImport, SingleNodeCommandGivesThatId) {
  const std::string dump =
      "$ cat /sys/class/kfd/kfd/topology/nodes/5/properties\ncpu_cores_count 0\nsimd_count 912\n";
  const auto nodes = import_kfd_properties_dump(dump, "one");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].id, 5u);
  EXPECT_EQ(error_of(dump + "----\ncpu_cores_count 0\nsimd_count 4\n", "one").find("one:1:"), 0u);
}

TEST(KfdDumpImport, EmptyDumpIsAnError) {
  EXPECT_NE(error_of("# only a header\n\n", "e").find("no KFD node properties"), std::string::npos);
  EXPECT_NE(error_of("cat /sys/class/kfd/kfd/topology/nodes/*/properties\n", "e").find("line 1"),
            std::string::npos);
}

TEST(KfdDumpImport, SecondCommandIsAnError) {
  const std::string cmd = "cat /sys/class/kfd/kfd/topology/nodes/*/properties\n";
  const std::string block = "cpu_cores_count 1\nsimd_count 0\n";
  EXPECT_NE(error_of(cmd + block + cmd + block, "two").find("two:4:"), std::string::npos);
}

}  // namespace
}  // namespace umem::hsa
