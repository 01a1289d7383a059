// Live discovery through ROCr: on this machine's real runtime (no driver here), and through the
// ROCr double serving the 4-socket MI300A rocminfo capture as ROCr 7.1 and as 5.2.3.
#include "umem/hsa_runtime/rocr_discovery.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rocr_test_env.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace {

using umem::agent;
using umem::memory_pool;
using umem::runtime_state;
using umem::topology;
using umem::test::scoped_env;

bool has_dev_kfd() { return std::filesystem::exists("/dev/kfd"); }

// Discovery with the runtime named by UMEM_HSA_RUNTIME_LIB (the loader's first candidate).
topology discover_with(const std::string& runtime, const std::optional<std::string>& snapshot,
                       const std::optional<std::string>& version) {
  scoped_env lib("UMEM_HSA_RUNTIME_LIB", runtime);
  scoped_env snap("UMEM_ROCR_DOUBLE_SNAPSHOT", snapshot);
  scoped_env ver("UMEM_ROCR_DOUBLE_VERSION", version);
  topology topo;
  umem::hsa::discover_rocr(topo);
  return topo;
}

void expect_same_pool(const memory_pool& got, const memory_pool& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(got.segment, want.segment);
  EXPECT_EQ(got.global_flags, want.global_flags);
  EXPECT_EQ(got.size_bytes, want.size_bytes);
  EXPECT_EQ(got.alloc_allowed, want.alloc_allowed);
  EXPECT_EQ(got.alloc_granule, want.alloc_granule);
  EXPECT_EQ(got.alloc_rec_granule, want.alloc_rec_granule);
  EXPECT_EQ(got.alloc_alignment, want.alloc_alignment);
  EXPECT_EQ(got.accessible_by_all, want.accessible_by_all);
  EXPECT_EQ(got.alloc_max_size, want.alloc_max_size);
  EXPECT_EQ(got.location, want.location);
}

void expect_same_agent(const agent& got, const agent& want, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.marketing_name, want.marketing_name);
  EXPECT_EQ(got.vendor_name, want.vendor_name);
  EXPECT_EQ(got.uuid, want.uuid);
  EXPECT_EQ(got.kfd_node, want.kfd_node);
  EXPECT_EQ(got.isas, want.isas);
  EXPECT_EQ(got.is_apu, want.is_apu);
  EXPECT_EQ(got.coherent_host_access, want.coherent_host_access);
  EXPECT_EQ(got.compute_units, want.compute_units);
  EXPECT_EQ(got.simds_per_cu, want.simds_per_cu);
  EXPECT_EQ(got.shader_engines, want.shader_engines);
  EXPECT_EQ(got.num_xcc, want.num_xcc);
  EXPECT_EQ(got.chip_id, want.chip_id);
  EXPECT_EQ(got.bdfid, want.bdfid);
  EXPECT_EQ(got.pci_domain, want.pci_domain);
  EXPECT_EQ(got.nearest_cpu_kfd_node, want.nearest_cpu_kfd_node);
  ASSERT_EQ(got.pools.size(), want.pools.size());
  for (std::size_t i = 0; i < got.pools.size(); ++i)
    expect_same_pool(got.pools[i], want.pools[i], where + " pool " + std::to_string(i + 1));
}

TEST(RocrDiscoveryLive, DebianRuntimeWithoutDriverIsNoDriver) {
  // This machine: Debian's libhsa-runtime64 5.2.3, no /dev/kfd; hsa_init returns 0x1008.
  if (has_dev_kfd()) GTEST_SKIP() << "needs a machine without /dev/kfd";
  scoped_env lib("UMEM_HSA_RUNTIME_LIB", std::nullopt);
  scoped_env rocm("ROCM_PATH", std::nullopt);
  try {
    (void)umem::hsa::rocr_library::load();
  } catch (const umem::error& e) {
    GTEST_SKIP() << "needs a libhsa-runtime64 on the library path: " << e.what();
  }
  topology topo;
  umem::hsa::discover_rocr(topo);
  EXPECT_EQ(topo.hsa.state, runtime_state::no_driver) << topo.hsa.state_reason;
  EXPECT_NE(topo.hsa.state_reason.find("no AMD GPU driver: /dev/kfd is absent (hsa_init returned "
                                       "0x1008 HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
            std::string::npos)
      << topo.hsa.state_reason;
  EXPECT_NE(topo.hsa.library_path.find("libhsa-runtime64.so.1"), std::string::npos);
  EXPECT_TRUE(topo.agents.empty());
  EXPECT_EQ(topo.sources, std::vector<std::string>{"rocr"});
}

TEST(RocrDiscoveryLive, MissingOverrideFallsBackToTheNextCandidate) {
  // The override does not exist; the search goes on ($ROCM_PATH, /opt/rocm, ld.so) and here
  // ends at Debian's runtime, so the verdict comes from that library, not "no library".
  if (has_dev_kfd()) GTEST_SKIP() << "needs a machine without /dev/kfd";
  scoped_env rocm("ROCM_PATH", std::nullopt);
  const topology topo =
      discover_with("/nonexistent/libhsa-runtime64.so.1", std::nullopt, std::nullopt);
  if (topo.hsa.state == runtime_state::no_library)
    GTEST_SKIP() << "needs a libhsa-runtime64 on the library path: " << topo.hsa.state_reason;
  EXPECT_EQ(topo.hsa.state, runtime_state::no_driver) << topo.hsa.state_reason;
  EXPECT_EQ(topo.hsa.library_path.find("/nonexistent"), std::string::npos) << topo.hsa.library_path;
}

TEST(RocrDiscoveryLive, UnusableLibraryIsNoLibraryNamingTheSymbol) {
  // The override loads but is not ROCr; the loader stops there instead of silently falling back.
  const topology topo = discover_with("libm.so.6", std::nullopt, std::nullopt);
  EXPECT_EQ(topo.hsa.state, runtime_state::no_library);
  EXPECT_NE(topo.hsa.state_reason.find("required symbol hsa_init"), std::string::npos)
      << topo.hsa.state_reason;
  EXPECT_EQ(topo.sources, std::vector<std::string>{"rocr"});
}

TEST(RocrDiscoveryDouble, NoDriverMode) {
  const topology topo = discover_with(UMEM_ROCR_DOUBLE_PATH, std::nullopt, "7.1");
  EXPECT_EQ(topo.hsa.state, runtime_state::no_driver);
  EXPECT_NE(topo.hsa.state_reason.find("hsa_init returned 0x1008"), std::string::npos)
      << topo.hsa.state_reason;
  if (!has_dev_kfd()) {
    EXPECT_NE(topo.hsa.state_reason.find("/dev/kfd is absent"), std::string::npos);
  }
  EXPECT_EQ(topo.hsa.library_path, UMEM_ROCR_DOUBLE_PATH);
  EXPECT_TRUE(topo.agents.empty());
}

TEST(RocrDiscoveryDouble, OtherInitFailureIsInitFailed) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  umem::test::temp_dir dir;
  const auto file = umem::test::write_snapshot(dir, umem::test::import_capture(capture));
  // The 5.2.3 build cannot imitate 7.1 (it lacks the VMM exports): hsa_init returns ERROR.
  const topology topo = discover_with(UMEM_ROCR_DOUBLE_523_PATH, file.string(), "7.1");
  EXPECT_EQ(topo.hsa.state, runtime_state::init_failed);
  EXPECT_NE(topo.hsa.state_reason.find("hsa_init failed: 0x1000 HSA_STATUS_ERROR"),
            std::string::npos)
      << topo.hsa.state_reason;
}

TEST(RocrDiscoveryDouble, Rocr71ServesTheMi300aCaptureUnchanged) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  const topology imported = umem::test::import_capture(capture);
  umem::test::temp_dir dir;
  const auto file = umem::test::write_snapshot(dir, imported);
  const topology live = discover_with(UMEM_ROCR_DOUBLE_PATH, file.string(), "7.1");

  // What differs by construction: where the model came from.
  EXPECT_EQ(imported.hsa.state, runtime_state::imported);
  EXPECT_EQ(live.hsa.state, runtime_state::available) << live.hsa.state_reason;
  EXPECT_NE(live.hsa.state_reason.find("7.1 (umem rocr double)"), std::string::npos);
  EXPECT_EQ(live.hsa.library_path, UMEM_ROCR_DOUBLE_PATH);
  EXPECT_EQ(live.sources, std::vector<std::string>{"rocr"});
  EXPECT_NE(imported.sources, live.sources);

  // Everything else, field by field.
  EXPECT_EQ(live.hsa.version_major, imported.hsa.version_major);
  EXPECT_EQ(live.hsa.version_minor, imported.hsa.version_minor);
  EXPECT_EQ(live.hsa.ext_version_major, imported.hsa.ext_version_major);
  EXPECT_EQ(live.hsa.ext_version_minor, imported.hsa.ext_version_minor);
  EXPECT_EQ(live.hsa.xnack_enabled, imported.hsa.xnack_enabled);
  EXPECT_EQ(live.hsa.svm_supported, imported.hsa.svm_supported);
  EXPECT_EQ(live.hsa.svm_accessible_by_default, imported.hsa.svm_accessible_by_default);
  EXPECT_EQ(live.hsa.virtual_mem_api_supported, imported.hsa.virtual_mem_api_supported);
  EXPECT_EQ(live.hsa.dmabuf_supported, imported.hsa.dmabuf_supported);
  EXPECT_EQ(live.hsa.mwaitx_enabled, imported.hsa.mwaitx_enabled);
  ASSERT_EQ(live.agents.size(), imported.agents.size());
  for (std::size_t i = 0; i < live.agents.size(); ++i)
    expect_same_agent(live.agents[i], imported.agents[i], "agent " + std::to_string(i + 1));

  // Facts read from the capture itself, so the comparison above cannot pass on two empty models.
  // Lines 7-8: "Runtime Version: 1.14", "Runtime Ext Version: 1.6"; 13-14: Mwaitx DISABLED,
  // DMAbuf Support YES.
  EXPECT_EQ(live.hsa.version_major, 1);
  EXPECT_EQ(live.hsa.version_minor, 14);
  EXPECT_EQ(live.hsa.ext_version_minor, 6);
  EXPECT_EQ(live.hsa.mwaitx_enabled, false);
  EXPECT_EQ(live.hsa.dmabuf_supported, true);
  ASSERT_EQ(live.agents.size(), 8u);  // "Agent 1" .. "Agent 8"
  // Agent 1 (CPU, Node 0): pool 1 FINE GRAINED, 130750360 KB (line 49).
  EXPECT_EQ(live.agents[0].kind, umem::agent_kind::cpu);
  EXPECT_EQ(live.agents[0].kfd_node, 0u);
  ASSERT_EQ(live.agents[0].pools.size(), 4u);
  EXPECT_EQ(live.agents[0].pools[0].size_bytes, 130750360ull * 1024);
  EXPECT_EQ(live.agents[0].pools[0].global_flags, umem::pool_flag::fine_grained);
  // Agent 5 (GPU, Node 4): gfx942, chip 0x74a0, BDFID 512, 228 CUs, 4 SIMDs/CU, 24 shader
  // engines, Coherent Host Access TRUE, Memory Properties APU (lines 281-311); pool 1 COARSE
  // 98647808 KB, recommended granule 2048KB (lines 333-337); ISA gfx942:sramecc+:xnack- (366).
  const agent& gpu = live.agents[4];
  EXPECT_EQ(gpu.kind, umem::agent_kind::gpu);
  EXPECT_EQ(gpu.name, "gfx942");
  EXPECT_EQ(gpu.kfd_node, 4u);
  EXPECT_EQ(gpu.chip_id, 0x74a0u);
  EXPECT_EQ(gpu.bdfid, 512u);
  EXPECT_EQ(gpu.compute_units, 228u);
  EXPECT_EQ(gpu.simds_per_cu, 4u);
  EXPECT_EQ(gpu.shader_engines, 24u);
  EXPECT_EQ(gpu.coherent_host_access, true);
  EXPECT_EQ(gpu.is_apu, true);
  ASSERT_EQ(gpu.pools.size(), 4u);
  EXPECT_EQ(gpu.pools[0].size_bytes, 98647808ull * 1024);
  EXPECT_EQ(gpu.pools[0].global_flags, umem::pool_flag::coarse_grained);
  EXPECT_EQ(gpu.pools[0].alloc_rec_granule, 2048u * 1024);
  EXPECT_EQ(gpu.pools[3].segment, umem::pool_segment::group);
  EXPECT_EQ(gpu.isas, std::vector<std::string>{"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"});
  EXPECT_EQ(live.xnack_enabled(), false);
}

TEST(RocrDiscoveryDouble, NearestCpuIsTranslatedToTheCpuKfdNode) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  topology machine = umem::test::import_capture(capture);
  // rocminfo does not print NEAREST_CPU; GPU i (KFD node 4+i) sits on socket i (fixtures README).
  for (auto& a : machine.agents)
    if (a.kind == umem::agent_kind::gpu) a.nearest_cpu_kfd_node = a.kfd_node - 4;
  umem::test::temp_dir dir;
  const topology live = discover_with(UMEM_ROCR_DOUBLE_PATH,
                                      umem::test::write_snapshot(dir, machine).string(), "6.4");
  ASSERT_EQ(live.agents.size(), 8u);
  EXPECT_EQ(live.agents[0].nearest_cpu_kfd_node, std::nullopt);  // CPUs answer handle 0
  for (std::size_t i = 4; i < 8; ++i)
    EXPECT_EQ(live.agents[i].nearest_cpu_kfd_node, i - 4) << "agent " << i + 1;
}

TEST(RocrDiscoveryDouble, Rocr523LeavesNewerAttributesUnknown) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  topology machine = umem::test::import_capture(capture);
  // Values a 5.2.3 runtime cannot report must vanish; SVM_ACCESSIBLE_BY_DEFAULT (5.2.3) stands in
  // for XNACK_ENABLED (6.0+), so set them to disagree to see which one discovery used.
  machine.hsa.svm_accessible_by_default = true;
  machine.hsa.xnack_enabled = false;
  for (auto& a : machine.agents) {
    a.num_xcc = a.kind == umem::agent_kind::gpu ? 6u : 0u;
    for (auto& p : a.pools) p.location = umem::pool_location::cpu;
  }
  umem::test::temp_dir dir;
  const auto file = umem::test::write_snapshot(dir, machine);
  const topology live = discover_with(UMEM_ROCR_DOUBLE_523_PATH, file.string(), "5.2.3");

  ASSERT_EQ(live.hsa.state, runtime_state::available) << live.hsa.state_reason;
  EXPECT_EQ(live.hsa.version_major, 1);  // 5.2.3 reports the HSA specification version 1.1
  EXPECT_EQ(live.hsa.version_minor, 1);
  EXPECT_EQ(live.hsa.ext_version_major, std::nullopt);
  EXPECT_EQ(live.hsa.ext_version_minor, std::nullopt);
  EXPECT_EQ(live.hsa.mwaitx_enabled, std::nullopt);
  EXPECT_EQ(live.hsa.dmabuf_supported, std::nullopt);
  EXPECT_EQ(live.hsa.virtual_mem_api_supported, std::nullopt);
  EXPECT_EQ(live.hsa.svm_accessible_by_default, true);
  EXPECT_EQ(live.hsa.xnack_enabled, true);  // derived from 0x202, not the snapshot's 0x206

  ASSERT_EQ(live.agents.size(), machine.agents.size());
  for (std::size_t i = 0; i < live.agents.size(); ++i) {
    const agent& got = live.agents[i];
    agent want = machine.agents[i];
    SCOPED_TRACE("agent " + std::to_string(i + 1));
    EXPECT_EQ(got.is_apu, std::nullopt);
    EXPECT_EQ(got.num_xcc, std::nullopt);
    for (const auto& p : got.pools) {
      EXPECT_EQ(p.alloc_rec_granule, std::nullopt);
      EXPECT_EQ(p.location, std::nullopt);
    }
    // The rest is what 5.2.3 knows and must match.
    want.is_apu.reset();
    want.num_xcc.reset();
    want.nearest_cpu_kfd_node.reset();
    for (auto& p : want.pools) {
      p.alloc_rec_granule.reset();
      p.location.reset();
    }
    expect_same_agent(got, want, "agent " + std::to_string(i + 1));
  }
}

TEST(RocrDiscoveryDouble, Rocr523BuildHasNoVmemSymbols) {
  const auto lib =
      umem::hsa::rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_523_PATH});
  EXPECT_FALSE(lib.has_vmem());
  EXPECT_EQ(lib.fn().hsa_amd_vmem_address_reserve, nullptr);
  EXPECT_EQ(lib.fn().hsa_amd_portable_export_dmabuf, nullptr);
}

}  // namespace
