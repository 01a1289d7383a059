#include "checks.hpp"

#include <gtest/gtest.h>

#include "capture_model.hpp"

namespace umem::umtopo {
namespace {

constexpr std::uint64_t kKiB = 1024, kMiB = kKiB * kKiB, kGiB = kMiB * kKiB;

const finding& find(const std::vector<finding>& fs, const std::string& id) {
  for (const auto& f : fs)
    if (f.id == id) return f;
  throw std::runtime_error("no finding " + id);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One GPU agent on one NUMA node, XNACK stated by its ISA.
topology one_socket(std::uint64_t node_bytes, std::uint64_t gpu_pool_bytes, bool xnack) {
  topology t;
  numa_node n;
  n.cpus = {0, 1};
  n.memory_total_bytes = node_bytes;
  t.numa.nodes = {n};
  agent g;
  g.kind = agent_kind::gpu;
  g.kfd_node = 1;
  g.isas = {std::string("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack") + (xnack ? "+" : "-")};
  memory_pool p;
  p.global_flags = pool_flag::coarse_grained;
  p.size_bytes = gpu_pool_bytes;
  p.alloc_allowed = true;
  g.pools = {p};
  t.agents = {g};
  t.gpu_numa = {{1, 0, "test", "set by the test"}};
  return t;
}

TEST(Checks, EveryCheckAnswersOnceInAFixedOrder) {
  const auto fs = run_checks(topology{});
  std::vector<std::string> ids;
  for (const auto& f : fs) ids.push_back(f.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"xnack-off", "ttm-limit", "thp-not-always", "numa-balancing-on",
                                           "compaction-off", "iommu-on", "gpu-not-local"}));
  for (const auto& f : fs) {
    EXPECT_EQ(f.level, severity::info) << f.id;
    EXPECT_TRUE(contains(f.title, "not checked")) << f.id << ": " << f.title;
  }
  EXPECT_FALSE(has_errors(fs));
}

TEST(Checks, RealFourSocketCaptureHasXnackOffAndTtmLimitErrors) {
  UMEM_REQUIRE_MI300A_4SOCKET(topo);
  const auto fs = run_checks(topo);
  EXPECT_TRUE(has_errors(fs));

  const auto& xnack = find(fs, "xnack-off");
  EXPECT_EQ(xnack.level, severity::error);
  // R:366 "Name: amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"; rocminfo prints no XNACK line here.
  EXPECT_TRUE(contains(xnack.evidence, "gfx942:sramecc+:xnack-")) << xnack.evidence;
  EXPECT_TRUE(contains(xnack.fix, "HSA_XNACK=1")) << xnack.fix;

  const auto& ttm = find(fs, "ttm-limit");
  EXPECT_EQ(ttm.level, severity::error);
  // Total memory from numactl N:6,9,12,15: 128193 + 128719 + 128719 + 128661 MiB; the fix is
  // that many 4 KiB pages (256 per MiB).
  const std::uint64_t total_mib = 128193 + 128719 + 128719 + 128661;
  const std::string pages = std::to_string(total_mib * 256);
  EXPECT_EQ(pages, "131658752");
  EXPECT_TRUE(contains(ttm.fix, "amdttm.pages_limit=" + pages + " amdttm.page_pool_size=" + pages)) << ttm.fix;
  EXPECT_TRUE(contains(ttm.fix, "options amdttm pages_limit=" + pages)) << ttm.fix;
  // GPU pools: 4 x 98647808 KiB (R:334) = 376.3 GiB; lost 514292 MiB - 385343 MiB = 125.9 GiB.
  EXPECT_TRUE(contains(ttm.title, "376.3 GiB of 502.2 GiB: 125.9 GiB")) << ttm.title;
  // Node 0: 128193 MiB = 125.2 GiB, minus 94.1 GiB of GPU pool = 31.1 GiB lost.
  EXPECT_TRUE(contains(ttm.evidence, "NUMA node 0: GPU pools 94.1 GiB of 125.2 GiB, 31.1 GiB not GPU-allocatable"))
      << ttm.evidence;
  EXPECT_TRUE(contains(ttm.evidence, "inferred from the GPU pools")) << ttm.evidence;

  EXPECT_EQ(find(fs, "gpu-not-local").level, severity::info);
  EXPECT_EQ(find(fs, "thp-not-always").title, "not checked: no transparent hugepage setting in the model");
}

TEST(Checks, TtmInferenceComparesTotalsNotUnequalSockets) {
  // With pages_limit = all, each GPU gets total / nodes (docs/rocm-runtime.md §2.1): more than the
  // smaller node holds, less than the larger. That is not a loss.
  topology t = one_socket(100 * kGiB, 110 * kGiB, true);
  numa_node big;
  big.os_index = 1;
  big.cpus = {2};
  big.memory_total_bytes = 120 * kGiB;
  t.numa.nodes.push_back(big);
  agent g2 = t.agents[0];
  g2.kfd_node = 2;
  t.agents.push_back(g2);
  t.gpu_numa.push_back({2, 1, "test", ""});
  EXPECT_EQ(find(run_checks(t), "ttm-limit").level, severity::info);
}

TEST(Checks, TtmKnobsDecideWhenPresent) {
  topology t = one_socket(128 * kGiB, 96 * kGiB, true);
  t.knobs.ttm_module = "amdttm";
  t.knobs.ttm_pages_limit = 33554432;  // AMD's MI300A guide: 33554432 pages per APU = 128 GiB
  auto f = find(run_checks(t), "ttm-limit");
  EXPECT_EQ(f.level, severity::info) << "the knob, not the stale pool size, decides: " << f.title;
  EXPECT_TRUE(contains(f.evidence, "amdttm pages_limit = 33554432")) << f.evidence;

  t.knobs.ttm_pages_limit = 25165824;  // 96 GiB
  f = find(run_checks(t), "ttm-limit");
  EXPECT_EQ(f.level, severity::error);
  EXPECT_TRUE(contains(f.title, "96.0 GiB of 128.0 GiB: 32.0 GiB")) << f.title;
  EXPECT_TRUE(contains(f.fix, "amdttm.pages_limit=33554432 amdttm.page_pool_size=33554432")) << f.fix;

  t.knobs.ttm_module = "ttm";
  f = find(run_checks(t), "ttm-limit");
  EXPECT_TRUE(contains(f.fix, "ttm.pages_limit=33554432")) << f.fix;
  EXPECT_TRUE(contains(f.fix, "/sys/module/ttm/parameters/pages_limit")) << f.fix;
}

TEST(Checks, TtmFallsBackToMemTotal) {
  topology t = one_socket(0, 0, true);
  t.numa.nodes.clear();
  t.knobs.mem_total_bytes = 8 * kGiB + 1;
  t.knobs.ttm_pages_limit = 1;
  const auto f = find(run_checks(t), "ttm-limit");
  EXPECT_EQ(f.level, severity::error);
  EXPECT_TRUE(contains(f.evidence, "MemTotal")) << f.evidence;
  EXPECT_TRUE(contains(f.fix, "pages_limit=2097153 ")) << "rounded up: " << f.fix;
  EXPECT_EQ(ttm_pages_for(8 * kGiB), 2097152u);
}

TEST(Checks, XnackRuntimeAttributeAndNoretry) {
  topology t = one_socket(kGiB, kGiB, true);
  EXPECT_EQ(find(run_checks(t), "xnack-off").level, severity::info);
  t.hsa.xnack_enabled = false;  // the runtime's answer wins over the ISA
  t.knobs.amdgpu_noretry = 1;
  const auto f = find(run_checks(t), "xnack-off");
  EXPECT_EQ(f.level, severity::error);
  EXPECT_TRUE(contains(f.evidence, "XNACK_ENABLED = false")) << f.evidence;
  EXPECT_TRUE(contains(f.evidence, "/sys/module/amdgpu/parameters/noretry = 1")) << f.evidence;
  EXPECT_TRUE(contains(f.fix, "amdgpu.noretry=0")) << f.fix;

  topology no_gpu;
  no_gpu.knobs.amdgpu_noretry = 1;
  const auto g = find(run_checks(no_gpu), "xnack-off");
  EXPECT_EQ(g.level, severity::info) << "no GPU: nothing to fault";
  EXPECT_TRUE(contains(g.evidence, "noretry = 1")) << g.evidence;
}

TEST(Checks, KernelKnobsTriggerAndClear) {
  topology t;
  auto level_of = [&](const char* id) { return find(run_checks(t), id).level; };

  t.knobs.thp_enabled = "madvise";
  EXPECT_EQ(level_of("thp-not-always"), severity::warning);
  t.knobs.thp_enabled = "always";
  EXPECT_EQ(level_of("thp-not-always"), severity::info);

  t.knobs.numa_balancing = 1;
  EXPECT_EQ(level_of("numa-balancing-on"), severity::warning);
  t.knobs.numa_balancing = 0;
  EXPECT_EQ(level_of("numa-balancing-on"), severity::info);

  t.knobs.compaction_proactiveness = 0;
  EXPECT_EQ(level_of("compaction-off"), severity::warning);
  t.knobs.compaction_proactiveness = 20;
  t.knobs.compact_unevictable_allowed = 0;
  const auto c = find(run_checks(t), "compaction-off");
  EXPECT_EQ(c.level, severity::warning);
  EXPECT_TRUE(contains(c.fix, "vm.compact_unevictable_allowed=1")) << c.fix;
  EXPECT_FALSE(contains(c.fix, "compaction_proactiveness")) << "only the bad key is fixed: " << c.fix;
  t.knobs.compact_unevictable_allowed = 1;
  EXPECT_EQ(level_of("compaction-off"), severity::info);

  t.knobs.iommu = iommu_mode::translated;
  t.knobs.iommu_evidence = "/sys/kernel/iommu_groups has 12 groups, default domain DMA";
  const auto i = find(run_checks(t), "iommu-on");
  EXPECT_EQ(i.level, severity::warning);
  EXPECT_TRUE(contains(i.evidence, "iommu_groups")) << i.evidence;
  t.knobs.iommu = iommu_mode::passthrough;
  EXPECT_EQ(level_of("iommu-on"), severity::info);
  t.knobs.iommu = iommu_mode::off;
  EXPECT_EQ(level_of("iommu-on"), severity::info);

  for (const auto& f : run_checks(t)) EXPECT_TRUE(f.fix.empty()) << f.id << " is fine but offers a fix";
}

TEST(Checks, GpuWithoutNumaNodeIsAnError) {
  topology t = one_socket(kGiB, kGiB, true);
  EXPECT_EQ(find(run_checks(t), "gpu-not-local").level, severity::info);
  t.gpu_numa = {{1, std::nullopt, "pci-sysfs", "/sys/bus/pci/devices/0000:00:00.0/numa_node = -1"}};
  const auto f = find(run_checks(t), "gpu-not-local");
  EXPECT_EQ(f.level, severity::error);
  EXPECT_TRUE(contains(f.evidence, "numa_node = -1")) << f.evidence;
  EXPECT_TRUE(has_errors(run_checks(t)));
}

TEST(Checks, RenderPutsErrorsFirstAndCounts) {
  std::vector<finding> fs = {{"a", severity::info, "ok: a", "", ""},
                             {"b", severity::error, "b broke", "saw b", "fix b"},
                             {"c", severity::warning, "c is odd", "", "fix c"}};
  const std::string text = render_findings(fs);
  EXPECT_LT(text.find("error [b]"), text.find("warning [c]"));
  EXPECT_LT(text.find("warning [c]"), text.find("info [a]"));
  EXPECT_TRUE(contains(text, "  evidence: saw b\n  fix: fix b\n")) << text;
  EXPECT_TRUE(contains(text, "1 error(s), 1 warning(s), 1 info\n")) << text;
}

}  // namespace
}  // namespace umem::umtopo
