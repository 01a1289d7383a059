// rocminfo import against real captures (expected values read from the files; line numbers
// cited) and against small broken variants built here.
#include "umem/importers/rocminfo_importer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "support/fixtures.hpp"
#include "umem/core/error.hpp"

namespace umem::importers {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t KiB = 1024;

constexpr const char* four_socket = "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt";
constexpr const char* one_socket =
    "rocminfo_mi300a_1socket_sh5_protosample_gfx940_ROCm-ROCm_4411.txt";
constexpr const char* mi300x = "rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt";
constexpr const char* strix_halo = "rocminfo_contrast_strixhalo_gfx1151_danbev.txt";
constexpr const char* mi300x_partial =
    "kfd_mem_banks_rocminfo_contrast_mi300x_cpx_ROCm-ROCm_4750_PARTIAL.txt";

constexpr std::uint32_t fine = pool_flag::fine_grained;
constexpr std::uint32_t coarse = pool_flag::coarse_grained;
constexpr std::uint32_t ext_fine = pool_flag::extended_scope_fine_grained;
constexpr std::uint32_t kernarg = pool_flag::kernarg_init;

// The message of the parse_error `f` throws; a test failure if it throws nothing else.
template <typename F>
std::string parse_error_of(F&& f) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::parse_error) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected umem::error(parse_error)";
  return {};
}

std::vector<std::uint32_t> global_flags_of(const agent& a) {
  std::vector<std::uint32_t> out;
  for (const auto& p : a.pools)
    if (p.is_global()) out.push_back(p.global_flags);
  return out;
}

TEST(RocminfoImporter, FourSocketMi300aSystemAttributes) {
  UMEM_REQUIRE_FIXTURE(path, four_socket);
  const auto imp = import_rocminfo(test::read_text(path), "h13qsh.txt");
  const auto& hsa = imp.topo.hsa;
  EXPECT_EQ(hsa.state, runtime_state::imported);
  EXPECT_EQ(hsa.version_major, 1);  // line 7 "Runtime Version: 1.14"
  EXPECT_EQ(hsa.version_minor, 14);
  EXPECT_EQ(hsa.ext_version_major, 1);  // line 8 "Runtime Ext Version: 1.6"
  EXPECT_EQ(hsa.ext_version_minor, 6);
  EXPECT_EQ(hsa.mwaitx_enabled, false);        // line 13
  EXPECT_EQ(hsa.dmabuf_supported, true);       // line 14
  EXPECT_EQ(hsa.xnack_enabled, std::nullopt);  // ROCm 6.4 rocminfo prints no "XNACK enabled"
  EXPECT_EQ(hsa.virtual_mem_api_supported, std::nullopt);
  EXPECT_EQ(hsa.svm_supported, std::nullopt);
  EXPECT_EQ(hsa.svm_accessible_by_default, std::nullopt);
  EXPECT_EQ(imp.topo.sources, std::vector<std::string>{"rocminfo:h13qsh.txt"});
  // Every line is either used or a known unmodelled key.
  EXPECT_TRUE(imp.unrecognized.empty())
      << imp.unrecognized.front().line << ": " << imp.unrecognized.front().message;
}

TEST(RocminfoImporter, FourSocketMi300aCpuAgents) {
  UMEM_REQUIRE_FIXTURE(path, four_socket);
  const auto topo = import_rocminfo(test::read_text(path), "h13qsh.txt").topo;
  ASSERT_EQ(topo.agents.size(), 8u);  // "Agent 1" .. "Agent 8" (lines 20 .. 592)
  // CPU pool sizes, lines 51, 116, 181, 246 (KB).
  const std::uint64_t sizes_kb[] = {130750360, 131809200, 131764472, 131797612};
  for (std::uint32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("agent " + std::to_string(i + 1));
    const agent& a = topo.agents[i];
    EXPECT_EQ(a.kind, agent_kind::cpu);
    EXPECT_EQ(a.kfd_node, i);
    EXPECT_EQ(a.name, "AMD Instinct MI300A Accelerator");
    EXPECT_EQ(a.vendor_name, "CPU");
    EXPECT_EQ(a.uuid, "CPU-XX");
    EXPECT_EQ(a.compute_units, 48u);
    EXPECT_EQ(a.chip_id, 0u);
    EXPECT_EQ(a.is_apu, false);  // empty "Memory Properties:" (line 48 for agent 1)
    EXPECT_EQ(a.coherent_host_access, std::nullopt);  // printed for GPUs only
    EXPECT_TRUE(a.isas.empty());
    EXPECT_EQ(global_flags_of(a),
              (std::vector<std::uint32_t>{fine, ext_fine, kernarg | fine, coarse}));
    ASSERT_EQ(a.pools.size(), 4u);
    for (const auto& p : a.pools) {
      EXPECT_EQ(p.size_bytes, sizes_kb[i] * KiB);
      EXPECT_TRUE(p.accessible_by_all);
      EXPECT_TRUE(p.alloc_allowed);
      EXPECT_EQ(p.alloc_granule, 4 * KiB);
      EXPECT_EQ(p.alloc_rec_granule, 4 * KiB);
      EXPECT_EQ(p.alloc_alignment, 4 * KiB);
      EXPECT_EQ(p.alloc_max_size, std::nullopt);
      EXPECT_EQ(p.location, std::nullopt);
    }
  }
}

TEST(RocminfoImporter, FourSocketMi300aGpuAgents) {
  UMEM_REQUIRE_FIXTURE(path, four_socket);
  const auto topo = import_rocminfo(test::read_text(path), "h13qsh.txt").topo;
  ASSERT_EQ(topo.agents.size(), 8u);
  const std::uint32_t bdfids[] = {512, 16640, 33024, 49408};  // lines 303, 407, 511, 615
  const char* pci[] = {"0000:02:00.0", "0000:41:00.0", "0000:81:00.0", "0000:c1:00.0"};
  for (std::uint32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("agent " + std::to_string(i + 5));
    const agent& g = topo.agents[4 + i];
    EXPECT_EQ(g.kind, agent_kind::gpu);
    EXPECT_EQ(g.kfd_node, 4 + i);  // lines 293, 397, 501, 605
    EXPECT_EQ(g.name, "gfx942");
    EXPECT_EQ(g.marketing_name, "AMD Instinct MI300A");
    EXPECT_EQ(g.vendor_name, "AMD");
    EXPECT_EQ(g.chip_id, 0x74a0u);  // "29856(0x74a0)", line 299
    EXPECT_EQ(g.compute_units, 228u);
    EXPECT_EQ(g.simds_per_cu, 4u);
    EXPECT_EQ(g.shader_engines, 24u);
    EXPECT_EQ(g.bdfid, bdfids[i]);
    EXPECT_EQ(g.pci_address(), pci[i]);
    EXPECT_EQ(g.is_apu, true);                // "Memory Properties: APU", line 311
    EXPECT_EQ(g.coherent_host_access, true);  // line 310
    EXPECT_EQ(g.isas, std::vector<std::string>{"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"});
    EXPECT_EQ(g.isa_xnack(), false);
    EXPECT_EQ(g.num_xcc, std::nullopt);  // rocminfo does not print these
    EXPECT_EQ(g.nearest_cpu_kfd_node, std::nullopt);
    EXPECT_EQ(g.pci_domain, std::nullopt);
    // Pools 1-4 (lines 336-367 for agent 5): the three GLOBAL views of HBM, then GROUP (LDS).
    // Agent 6's "Pool 4" (line 460) is complete in this capture: GROUP, 64 KB.
    ASSERT_EQ(g.pools.size(), 4u);
    EXPECT_EQ(global_flags_of(g), (std::vector<std::uint32_t>{coarse, ext_fine, fine}));
    for (int p = 0; p < 3; ++p) {
      EXPECT_EQ(g.pools[p].size_bytes, 98647808 * KiB);  // 0.75 * total / 4 GPUs (TTM limit)
      EXPECT_FALSE(g.pools[p].accessible_by_all);
      EXPECT_EQ(g.pools[p].alloc_rec_granule, 2048 * KiB);
      EXPECT_EQ(g.pools[p].alloc_granule, 4 * KiB);
    }
    const memory_pool& group = g.pools[3];
    EXPECT_EQ(group.segment, pool_segment::group);
    EXPECT_EQ(group.global_flags, 0u);
    EXPECT_EQ(group.size_bytes, 64 * KiB);
    EXPECT_FALSE(group.alloc_allowed);
    EXPECT_EQ(group.alloc_granule, 0u);
  }
  EXPECT_EQ(topo.xnack_enabled(), false);  // from the ISAs: "xnack-"
}

TEST(RocminfoImporter, OneSocketPrototypeGfx940) {
  UMEM_REQUIRE_FIXTURE(path, one_socket);
  const auto imp = import_rocminfo(test::read_text(path), "sh5.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  const auto& agents = imp.topo.agents;
  ASSERT_EQ(agents.size(), 2u);
  EXPECT_EQ(agents[0].kind, agent_kind::cpu);
  EXPECT_EQ(agents[0].name, "AMD Proto Sample : SH5-MI300A-A0");  // a value containing ':'
  EXPECT_EQ(agents[0].pools.at(0).size_bytes, 131174896 * KiB);
  const agent& g = agents[1];
  EXPECT_EQ(g.kind, agent_kind::gpu);
  EXPECT_EQ(g.name, "gfx940");
  EXPECT_EQ(g.kfd_node, 1u);
  EXPECT_EQ(g.bdfid, 256u);
  EXPECT_EQ(g.chip_id, 0x74a0u);
  EXPECT_EQ(g.is_apu, true);
  EXPECT_EQ(g.isas, std::vector<std::string>{"amdgcn-amd-amdhsa--gfx940:sramecc+:xnack-"});
  ASSERT_EQ(g.pools.size(), 4u);
  EXPECT_EQ(g.pools[2].global_flags, fine);
  EXPECT_EQ(g.pools[2].size_bytes, 98381172 * KiB);
}

TEST(RocminfoImporter, DiscreteMi300xIsNotAnApu) {
  UMEM_REQUIRE_FIXTURE(path, mi300x);
  const auto imp = import_rocminfo(test::read_text(path), "mi300x.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  const auto& hsa = imp.topo.hsa;
  EXPECT_EQ(hsa.version_major, 1);  // line 6 "Runtime Version: 1.1"
  EXPECT_EQ(hsa.version_minor, 1);
  EXPECT_EQ(hsa.ext_version_major, std::nullopt);  // this older rocminfo prints no ext version
  const auto& agents = imp.topo.agents;
  ASSERT_EQ(agents.size(), 6u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(agents[i].kind, agent_kind::cpu);
    EXPECT_EQ(agents[i].is_apu, std::nullopt);  // no "Memory Properties" line at all
    EXPECT_EQ(global_flags_of(agents[i]),
              (std::vector<std::uint32_t>{fine, kernarg | fine, coarse}));
    EXPECT_EQ(agents[i].pools[0].alloc_rec_granule, std::nullopt);  // key absent
  }
  EXPECT_EQ(agents[0].pools[0].size_bytes, 1188729676 * KiB);  // line 50
  const std::uint32_t bdfids[] = {9728, 17920, 25856, 34048};  // lines 147, 246, 345, 444
  for (std::uint32_t i = 0; i < 4; ++i) {
    const agent& g = agents[2 + i];
    EXPECT_EQ(g.kind, agent_kind::gpu);
    EXPECT_EQ(g.kfd_node, 2 + i);
    EXPECT_EQ(g.marketing_name, "AMD Instinct MI300X");
    EXPECT_EQ(g.chip_id, 0x74a1u);
    EXPECT_EQ(g.compute_units, 304u);
    EXPECT_EQ(g.bdfid, bdfids[i]);
    EXPECT_NE(g.is_apu, true);                 // no "Memory Properties: APU"
    EXPECT_EQ(g.coherent_host_access, false);  // line 154
    // Its own VRAM: 192 GiB, unrelated to the hosts' memory.
    ASSERT_EQ(g.pools.size(), 4u);
    EXPECT_EQ(g.pools[0].global_flags, coarse);
    EXPECT_EQ(g.pools[0].size_bytes, 201310208 * KiB);  // line 177
    EXPECT_NE(g.pools[0].size_bytes, agents[0].pools[0].size_bytes);
  }
}

TEST(RocminfoImporter, StrixHaloUnpaddedWithNpu) {
  UMEM_REQUIRE_FIXTURE(path, strix_halo);
  const auto imp = import_rocminfo(test::read_text(path), "strix.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  const auto& hsa = imp.topo.hsa;
  EXPECT_EQ(hsa.version_minor, 18);                // line 7
  EXPECT_EQ(hsa.ext_version_minor, 14);            // line 8
  EXPECT_EQ(hsa.xnack_enabled, false);             // line 14 "XNACK enabled: NO"
  EXPECT_EQ(hsa.virtual_mem_api_supported, true);  // line 16 "VMM Support: YES"
  const auto& agents = imp.topo.agents;
  ASSERT_EQ(agents.size(), 3u);
  EXPECT_EQ(agents[0].kind, agent_kind::cpu);
  EXPECT_EQ(agents[0].name, "AMD RYZEN AI MAX+ 395 w/ Radeon 8060S");

  const agent& g = agents[1];
  EXPECT_EQ(g.kind, agent_kind::gpu);
  EXPECT_EQ(g.name, "gfx1151");
  EXPECT_EQ(g.uuid, "GPU-XX");
  EXPECT_EQ(g.is_apu, true);                 // line 118
  EXPECT_EQ(g.coherent_host_access, false);  // line 117
  EXPECT_EQ(g.isas, (std::vector<std::string>{"amdgcn-amd-amdhsa--gfx1151",
                                              "amdgcn-amd-amdhsa--gfx11-generic"}));
  EXPECT_EQ(g.isa_xnack(), std::nullopt);
  // Pools (lines 137-158): COARSE, EXTENDED FINE, GROUP; no plain FINE GRAINED GLOBAL pool.
  EXPECT_EQ(global_flags_of(g), (std::vector<std::uint32_t>{coarse, ext_fine}));
  ASSERT_EQ(g.pools.size(), 3u);
  EXPECT_EQ(g.pools[2].segment, pool_segment::group);
  EXPECT_EQ(g.pools[0].size_bytes, 67108864 * KiB);

  const agent& npu = agents[2];  // "Device Type: DSP", line 215
  EXPECT_EQ(npu.kind, agent_kind::other);
  EXPECT_EQ(npu.name, "aie2");
  EXPECT_EQ(npu.marketing_name, "AIE-ML");
  EXPECT_EQ(npu.kfd_node, 0u);
  EXPECT_EQ(npu.is_apu, false);
  EXPECT_EQ(global_flags_of(npu), (std::vector<std::uint32_t>{kernarg | coarse, coarse, coarse}));
  EXPECT_EQ(npu.pools[1].size_bytes, 65536 * KiB);
  EXPECT_EQ(npu.pools[1].alloc_rec_granule, 0u);
  EXPECT_EQ(imp.topo.gpus().size(), 1u);
}

TEST(RocminfoImporter, PartialMi300xAgentBlock) {
  UMEM_REQUIRE_FIXTURE(path, mi300x_partial);
  const auto imp = import_rocminfo(test::read_text(path), "partial.txt");
  // No "HSA System Attributes" section: nothing is known about the runtime.
  EXPECT_EQ(imp.topo.hsa.state, runtime_state::imported);
  EXPECT_EQ(imp.topo.hsa.version_major, std::nullopt);
  EXPECT_EQ(imp.topo.hsa.dmabuf_supported, std::nullopt);
  // Lines 3-8: the "$ cat .../mem_banks/0/properties" prompt and its five lines are not rocminfo.
  ASSERT_EQ(imp.unrecognized.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(imp.unrecognized[i].line, 3 + i);
  EXPECT_EQ(imp.unrecognized[1].text, "heap_type 1");
  ASSERT_EQ(imp.topo.agents.size(), 1u);
  const agent& g = imp.topo.agents[0];
  EXPECT_EQ(g.kfd_node, 2u);
  EXPECT_EQ(g.bdfid, 1280u);
  EXPECT_EQ(g.compute_units, 38u);  // one CPX partition
  EXPECT_EQ(g.is_apu, false);       // empty "Memory Properties:"
  EXPECT_EQ(g.coherent_host_access, false);
  ASSERT_EQ(g.pools.size(), 4u);
  // 25163776 KB == the mem_bank's size_in_bytes 25767706624 (line 4).
  EXPECT_EQ(g.pools[0].size_bytes, 25767706624u);
}

TEST(RocminfoImporter, UnpaddedAndCrlfCopiesGiveTheSameModel) {
  UMEM_REQUIRE_FIXTURE(path, four_socket);
  const std::string text = test::read_text(path);
  const auto padded = import_rocminfo(text, "x");
  const std::string unpadded = std::regex_replace(text, std::regex(" +\n"), "\n");
  const std::string crlf = std::regex_replace(text, std::regex("\n"), "\r\n");
  ASSERT_NE(unpadded, text);
  EXPECT_EQ(import_rocminfo(unpadded, "x").topo, padded.topo);
  EXPECT_EQ(import_rocminfo(crlf, "x").topo, padded.topo);
}

// A small dump in the ROCm 6.x layout; line numbers are given by the comments.
const std::string small_dump =
    "ROCk module is loaded\n"                                                     // 1
    "=====================\n"                                                     // 2
    "HSA System Attributes\n"                                                     // 3
    "=====================\n"                                                     // 4
    "Runtime Version:         1.14\n"                                             // 5
    "==========\n"                                                                // 6
    "HSA Agents\n"                                                                // 7
    "==========\n"                                                                // 8
    "*******\n"                                                                   // 9
    "Agent 1\n"                                                                   // 10
    "*******\n"                                                                   // 11
    "  Name:                    gfx942\n"                                         // 12
    "  Node:                    4\n"                                              // 13
    "  Device Type:             GPU\n"                                            // 14
    "  Chip ID:                 29856(0x74a0)\n"                                  // 15
    "  Memory Properties:       APU\n"                                            // 16
    "  Pool Info:\n"                                                              // 17
    "    Pool 1\n"                                                                // 18
    "      Segment:                 GLOBAL; FLAGS: FINE GRAINED\n"                // 19
    "      Size:                    98647808(0x5e13f00) KB\n"                     // 20
    "      Allocatable:             TRUE\n"                                       // 21
    "      Alloc Granule:           4KB\n"                                        // 22
    "      Alloc Alignment:         4KB\n"                                        // 23
    "      Accessible by all:       FALSE\n"                                      // 24
    "  ISA Info:\n"                                                               // 25
    "    ISA 1\n"                                                                 // 26
    "      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-\n"  // 27
    "*** Done ***\n";                                                             // 28

// `small_dump` with line `number` (1-based) replaced by `replacement` (may hold several lines,
// or none).
std::string with_line(int number, const std::string& replacement) {
  std::string out;
  int n = 0;
  std::size_t pos = 0;
  while (pos < small_dump.size()) {
    const std::size_t end = small_dump.find('\n', pos) + 1;
    if (++n == number)
      out += replacement;
    else
      out += small_dump.substr(pos, end - pos);
    pos = end;
  }
  return out;
}

TEST(RocminfoImporterMalformed, SmallDumpIsValid) {
  const auto imp = import_rocminfo(small_dump, "t.txt");
  EXPECT_TRUE(imp.unrecognized.empty());
  ASSERT_EQ(imp.topo.agents.size(), 1u);
  EXPECT_EQ(imp.topo.agents[0].pools.size(), 1u);
  EXPECT_EQ(imp.topo.agents[0].isas.size(), 1u);
}

TEST(RocminfoImporterMalformed, BadNumberNamesLineAndValue) {
  const auto msg =
      parse_error_of([] { import_rocminfo(with_line(13, "  Node:  four\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:13:"));
  EXPECT_THAT(msg, HasSubstr("'Node:'"));
  EXPECT_THAT(msg, HasSubstr("'four'"));
}

TEST(RocminfoImporterMalformed, TruncatedSizeLine) {
  const auto msg = parse_error_of([] {
    import_rocminfo(with_line(20, "      Size:                    98647808(0x5e1\n"), "t.txt");
  });
  EXPECT_THAT(msg, HasSubstr("t.txt:20:"));
  EXPECT_THAT(msg, HasSubstr("KB"));
}

TEST(RocminfoImporterMalformed, DecimalAndHexMustAgree) {
  const auto msg = parse_error_of(
      [] { import_rocminfo(with_line(15, "  Chip ID:  29856(0x74a1)\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:15:"));
}

TEST(RocminfoImporterMalformed, UnknownPoolFlagIsAnError) {
  const auto msg = parse_error_of([] {
    import_rocminfo(with_line(19, "      Segment:  GLOBAL; FLAGS: FINE GRAINED, SHINY\n"), "t.txt");
  });
  EXPECT_THAT(msg, HasSubstr("t.txt:19:"));
  EXPECT_THAT(msg, HasSubstr("'SHINY'"));
}

TEST(RocminfoImporterMalformed, UnknownDeviceTypeIsAnError) {
  const auto msg =
      parse_error_of([] { import_rocminfo(with_line(14, "  Device Type:  FPGA\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:14:"));
}

TEST(RocminfoImporterMalformed, UnknownKeysAndLinesAreReportedNotGuessed) {
  const std::string text =
      with_line(16, "  Memory Properties:       APU HUGE\n  Frobnication:  3\n  garbage\n");
  const auto imp = import_rocminfo(text, "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 3u);
  EXPECT_EQ(imp.unrecognized[0].line, 16);
  EXPECT_THAT(imp.unrecognized[0].message, HasSubstr("'HUGE'"));
  EXPECT_EQ(imp.unrecognized[1].line, 17);
  EXPECT_EQ(imp.unrecognized[1].text, "  Frobnication:  3");
  EXPECT_EQ(imp.unrecognized[2].line, 18);
  EXPECT_EQ(imp.unrecognized[2].text, "  garbage");
  EXPECT_EQ(imp.topo.agents.at(0).is_apu, true);
}

TEST(RocminfoImporterMalformed, UnknownSystemAttributeAndTrailingTextAreReported) {
  std::string text =
      with_line(5, "Runtime Version:  1.14\nQuantum Mode:  ON\n") + "[user@host ~]$\n";
  const auto imp = import_rocminfo(text, "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 2u);
  EXPECT_EQ(imp.unrecognized[0].line, 6);
  EXPECT_EQ(imp.unrecognized[1].line, 30);  // after "*** Done ***" (now line 29)
}

// See Note [Incomplete pool blocks] in rocminfo_importer.cpp.
TEST(RocminfoImporterMalformed, PoolHeaderWithoutFieldsIsReportedAndNotImported) {
  const std::string text = with_line(25, "    Pool 2\n  ISA Info:\n");
  const auto imp = import_rocminfo(text, "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 1u);
  EXPECT_EQ(imp.unrecognized[0].line, 25);
  EXPECT_EQ(imp.unrecognized[0].text, "    Pool 2");
  EXPECT_THAT(imp.unrecognized[0].message, HasSubstr("cut"));
  EXPECT_EQ(imp.topo.agents.at(0).pools.size(), 1u);
  EXPECT_EQ(imp.topo.agents.at(0).isas.size(), 1u);
}

TEST(RocminfoImporterMalformed, CaptureCutAfterPoolHeader) {
  std::string text = small_dump.substr(0, small_dump.find("  ISA Info:")) + "    Pool 2\n";
  const auto imp = import_rocminfo(text, "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 1u);
  EXPECT_EQ(imp.unrecognized[0].line, 25);
  EXPECT_EQ(imp.topo.agents.at(0).pools.size(), 1u);
}

TEST(RocminfoImporterMalformed, PoolMissingAKeyIsReportedAndNotImported) {
  const auto imp = import_rocminfo(with_line(24, ""), "t.txt");
  ASSERT_EQ(imp.unrecognized.size(), 1u);
  EXPECT_EQ(imp.unrecognized[0].line, 18);  // the "Pool 1" header
  EXPECT_THAT(imp.unrecognized[0].message, HasSubstr("'Accessible by all'"));
  EXPECT_TRUE(imp.topo.agents.at(0).pools.empty());
}

TEST(RocminfoImporterMalformed, AgentWithoutNodeIsAnError) {
  const auto msg = parse_error_of([] { import_rocminfo(with_line(13, ""), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:10:"));  // the "Agent 1" header
  EXPECT_THAT(msg, HasSubstr("'Node:'"));
}

TEST(RocminfoImporterMalformed, DuplicateKeyIsAnError) {
  const auto msg = parse_error_of(
      [] { import_rocminfo(with_line(14, "  Device Type:  GPU\n  Node:  5\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:15:"));
  EXPECT_THAT(msg, HasSubstr("line 13"));
}

TEST(RocminfoImporterMalformed, BadAgentHeaderIsAnError) {
  const auto msg = parse_error_of([] { import_rocminfo(with_line(10, "Agent one\n"), "t.txt"); });
  EXPECT_THAT(msg, HasSubstr("t.txt:10:"));
}

TEST(RocminfoImporterMalformed, InvalidUtf8IsAnErrorValidUtf8IsText) {
  const auto msg = parse_error_of([] {
    import_rocminfo(with_line(12,
                              "  Name:  gfx\xff"
                              "942\n"),
                    "t.txt");
  });
  EXPECT_THAT(msg, HasSubstr("t.txt:12:"));
  EXPECT_THAT(msg, HasSubstr("UTF-8"));
  const auto imp = import_rocminfo(with_line(12, "  Name:  Radeon\u2122\n"), "t.txt");
  EXPECT_EQ(imp.topo.agents.at(0).name, "Radeon\u2122");
}

TEST(RocminfoImporterMalformed, EmptyOrAgentlessInputIsAnError) {
  EXPECT_THAT(parse_error_of([] { import_rocminfo("", "e.txt"); }), HasSubstr("e.txt: empty"));
  EXPECT_THAT(parse_error_of([] { import_rocminfo(" \n\n", "e.txt"); }), HasSubstr("empty"));
  EXPECT_THAT(parse_error_of([] { import_rocminfo(small_dump.substr(0, 120), "e.txt"); }),
              HasSubstr("no 'Agent N' block"));
  EXPECT_THAT(parse_error_of([] { import_rocminfo("available: 1 nodes (0)\n", "e.txt"); }),
              HasSubstr("no 'Agent N' block"));
}

}  // namespace
}  // namespace umem::importers
