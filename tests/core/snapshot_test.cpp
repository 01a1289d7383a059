#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "umem/core/error.hpp"
#include "umem/core/snapshot.hpp"

namespace umem {
namespace {

// A model with every optional field set, every enum non-default and odd values, so a field the
// serializer forgets or mangles shows up as an inequality.
topology full_model() {
  topology t;
  t.sources = {"rocr", "kfd-sysfs:/", "hwloc"};
  t.hostname = "node17";
  t.hsa.state = runtime_state::available;
  t.hsa.state_reason = "hsa_init succeeded";
  t.hsa.library_path = "/opt/rocm/lib/libhsa-runtime64.so.1";
  t.hsa.version_major = 1;
  t.hsa.version_minor = 18;
  t.hsa.ext_version_major = 1;
  t.hsa.ext_version_minor = 11;
  t.hsa.xnack_enabled = true;
  t.hsa.svm_supported = true;
  t.hsa.svm_accessible_by_default = false;
  t.hsa.virtual_mem_api_supported = true;
  t.hsa.dmabuf_supported = false;
  t.hsa.mwaitx_enabled = false;
  agent g;
  g.kind = agent_kind::gpu;
  g.name = "gfx942";
  g.marketing_name = "AMD Instinct MI300A";
  g.vendor_name = "AMD";
  g.uuid = "GPU-5bd3148dc76b831a";
  g.kfd_node = 5;
  g.isas = {"amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+", "amdgcn-amd-amdhsa--gfx9-4-generic"};
  g.is_apu = true;
  g.coherent_host_access = true;
  g.compute_units = 228;
  g.simds_per_cu = 4;
  g.shader_engines = 24;
  g.num_xcc = 6;
  g.chip_id = 0x74a0;
  g.bdfid = 16640;
  g.pci_domain = 1;
  g.nearest_cpu_kfd_node = 1;
  memory_pool p;
  p.global_flags = pool_flag::coarse_grained;
  p.size_bytes = 98647808ull * 1024;
  p.alloc_allowed = true;
  p.alloc_granule = 4096;
  p.alloc_rec_granule = 2u << 20;
  p.alloc_alignment = 4096;
  p.alloc_max_size = 1ull << 40;
  p.location = pool_location::gpu;
  g.pools.push_back(p);
  memory_pool group;
  group.segment = pool_segment::group;
  group.size_bytes = 65536;
  g.pools.push_back(group);
  t.agents.push_back(g);
  // An NVIDIA GPU from the CUDA backend, every cuda_device_info field set and the bools mixed.
  agent n;
  n.kind = agent_kind::gpu;
  n.name = "sm_90";
  n.marketing_name = "NVIDIA H200";
  n.kfd_node = 9;
  n.bdfid = 0x1800;
  n.pci_domain = 0;
  cuda_device_info cu;
  cu.ordinal = 1;
  cu.cc_major = 9;
  cu.cc_minor = 0;
  cu.total_memory_bytes = 150754820096ull;
  cu.integrated = false;
  cu.can_map_host_memory = true;
  cu.unified_addressing = true;
  cu.managed_memory = true;
  cu.pageable_memory_access = false;
  cu.concurrent_managed_access = true;
  cu.can_use_host_pointer_for_registered_mem = true;
  cu.host_register_supported = true;
  cu.pageable_memory_access_uses_host_page_tables = false;
  cu.direct_managed_mem_access_from_host = false;
  cu.host_numa_id = 3;
  n.cuda = cu;
  t.agents.push_back(n);
  agent c;
  c.kind = agent_kind::cpu;
  c.name = "AMD Instinct MI300A Accelerator";
  t.agents.push_back(c);
  t.numa.nodes = {{0, {0, 1, 96}, 128193ull << 20, 126397ull << 20, 0},
                  {1, {24, 25}, 128719ull << 20, std::nullopt, std::nullopt}};
  t.numa.distances = {{10, 32}, {32, 10}};
  kfd_node k;
  k.id = 4;
  k.name = "gfx942";
  k.gpu_id = 12345;
  k.properties = {{"simd_count", 912}, {"device_id", 29856}};
  k.mem_banks = {{1, 25767706624ull, 0, 64, 1300}};
  k.io_links = {{11, 4, 5, 15, 1, 2, 3}};
  t.kfd_nodes.push_back(k);
  t.knobs.amdgpu_noretry = 1;
  t.knobs.ttm_module = "amdttm";
  t.knobs.ttm_pages_limit = 98540199;
  t.knobs.ttm_page_pool_size = 98540199;
  t.knobs.thp_enabled = "madvise";
  t.knobs.thp_defrag = "never";
  t.knobs.numa_balancing = 1;
  t.knobs.compaction_proactiveness = 0;
  t.knobs.compact_unevictable_allowed = 1;
  t.knobs.iommu = iommu_mode::passthrough;
  t.knobs.iommu_evidence = "iommu=pt on the kernel command line";
  t.knobs.mem_total_bytes = 526121644ull * 1024;
  t.gpu_numa = {{5, 1, "rocr-nearest-cpu", "NEAREST_CPU is KFD node 1"},
                {6, std::nullopt, "none", "no evidence"}};
  t.cuda.state = runtime_state::no_driver;
  t.cuda.state_reason = "cuInit: CUDA_ERROR_NO_DEVICE";
  t.cuda.library_path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1";
  t.cuda.driver_version = 13000;
  t.gpu_backend = {"rocr", "the ROCm runtime is available"};
  return t;
}

TEST(Snapshot, FullModelRoundTripsExactly) {
  const topology t = full_model();
  const topology back = snapshot_from_json(snapshot_to_json(t));
  EXPECT_EQ(back, t);
  EXPECT_EQ(back.agents[0].pools[0].alloc_rec_granule, 2u << 20);
  EXPECT_FALSE(back.numa.nodes[1].memory_free_bytes.has_value());
}

// Version 1 snapshots (before the CUDA backend) may lack agents[].cuda, cuda and gpu_backend.
TEST(Snapshot, AVersion1SnapshotWithoutTheCudaKeysLoads) {
  topology t = full_model();
  nlohmann::json j = nlohmann::json::parse(snapshot_to_json(t));
  EXPECT_EQ(j["schema_version"], 2);
  j["schema_version"] = 1;
  j.erase("cuda");
  j.erase("gpu_backend");
  for (auto& a : j["agents"]) a.erase("cuda");
  const topology back = snapshot_from_json(j.dump());
  EXPECT_EQ(back.schema_version, topology_schema_version);  // read as the current version
  EXPECT_EQ(back.cuda, cuda_system_info{});
  EXPECT_EQ(back.gpu_backend, gpu_backend_info{});
  EXPECT_FALSE(back.agents[1].cuda.has_value());
  EXPECT_EQ(back.agents[1].marketing_name, "NVIDIA H200");
}

// The version that added a key requires it.
TEST(Snapshot, AVersion2SnapshotMustCarryTheCudaKeys) {
  nlohmann::json j = nlohmann::json::parse(snapshot_to_json(full_model()));
  j.erase("gpu_backend");
  try {
    (void)snapshot_from_json(j.dump());
    FAIL() << "a version 2 snapshot without gpu_backend loaded";
  } catch (const umem::error& e) {
    EXPECT_NE(std::string(e.what()).find("$.gpu_backend: missing"), std::string::npos) << e.what();
  }
  j = nlohmann::json::parse(snapshot_to_json(full_model()));
  j["agents"][1].erase("cuda");
  EXPECT_THROW((void)snapshot_from_json(j.dump()), umem::error);
}

TEST(Snapshot, CudaKeysAreStrictWhenPresent) {
  nlohmann::json j = nlohmann::json::parse(snapshot_to_json(full_model()));
  j["agents"][1]["cuda"]["pageable_memory_access"] = "no";
  EXPECT_THROW(snapshot_from_json(j.dump()), umem::error);
}

TEST(Snapshot, EmptyModelRoundTrips) {
  const topology t;
  EXPECT_EQ(snapshot_from_json(snapshot_to_json(t)), t);
}

TEST(Snapshot, UnknownIsNullNotFalse) {
  topology t;
  const std::string text = snapshot_to_json(t);
  EXPECT_NE(text.find("\"xnack_enabled\": null"), std::string::npos) << text;
}

TEST(Snapshot, FileRoundTrip) {
  const auto dir = std::filesystem::temp_directory_path() / "umem_snapshot_test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "node.json";
  save_snapshot(full_model(), file);
  EXPECT_EQ(load_snapshot(file), full_model());
  std::filesystem::remove_all(dir);
}

void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    snapshot_from_json(text, "bug.json");
    FAIL() << "accepted: " << text;
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::parse_error);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bug.json"), std::string::npos) << e.what();
  }
}

TEST(Snapshot, RejectsBadInputWithThePath) {
  expect_parse_error("{not json", "not valid JSON");
  expect_parse_error("[1,2]", "not a umem topology snapshot");
  expect_parse_error(R"({"format":"something-else"})", "not a umem topology snapshot");
  std::string text = snapshot_to_json(full_model());
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = text;
    auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  expect_parse_error(replace("\"schema_version\": 2", "\"schema_version\": 99"),
                     "schema_version 99 is not supported (this umem reads versions 1 to 2)");
  expect_parse_error(replace("\"schema_version\": 2", "\"schema_version\": 0"),
                     "schema_version 0 is not supported");
  expect_parse_error(replace("\"kind\": \"gpu\"", "\"kind\": \"fpga\""),
                     "$.agents[0].kind: unknown value 'fpga'");
  expect_parse_error(replace("\"compute_units\": 228", "\"compute_units\": \"many\""),
                     "$.agents[0].compute_units: wrong type (string)");
  expect_parse_error(replace("\"hostname\": \"node17\",", ""), "$.hostname: missing");
  expect_parse_error(replace("\"compute_units\": 228", "\"compute_units\": -1"),
                     "$.agents[0].compute_units");
  // Numbers inside arrays and maps get the same checks (a fuzzer found 1.8e93 read as unsigned).
  expect_parse_error(replace("\"cpus\": [", "\"cpus\": [1.8e93, "),
                     "$.numa.nodes[0].cpus[0]: wrong type (number)");
  expect_parse_error(replace("\"cpus\": [", "\"cpus\": [-3, "), "$.numa.nodes[0].cpus[0]");
}

TEST(Snapshot, MissingFileIsNotFound) {
  try {
    load_snapshot("/nonexistent/umem.json");
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/umem.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace umem

namespace umem {
namespace {

TEST(Snapshot, InvalidUtf8IsReplacedNotFatal) {
  topology t;
  t.hostname = std::string("node\xff") + "1";
  const std::string text = snapshot_to_json(t);
  EXPECT_EQ(snapshot_from_json(text).hostname, "node\xEF\xBF\xBD" "1");
}

}  // namespace
}  // namespace umem
