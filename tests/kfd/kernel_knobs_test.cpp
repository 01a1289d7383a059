// read_kernel_knobs over fake /sys and /proc trees, and on this machine.
#include <gtest/gtest.h>

#include <sstream>

#include "support/fixtures.hpp"
#include "support/sysfs_tree.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kernel_knobs.hpp"

namespace umem::hsa {
namespace {

const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
const std::string amdttm = "/sys/module/amdttm/parameters/";
const std::string ttm = "/sys/module/ttm/parameters/";

// MemTotal from the 4-socket MI300A node in the fixtures README ("0.75 x 526121644 KB / 4").
constexpr std::uint64_t mi300a_mem_total_kib = 526121644;

std::map<std::string, std::string> mi300a_as_shipped(const std::string& pages_limit_text) {
  return {
      {amdttm + "pages_limit", pages_limit_text},
      {"/sys/module/amdgpu/parameters/noretry", "1\n"},  // MI300A default (platform.md)
      {thp + "enabled", "always [madvise] never\n"},
      {thp + "defrag", "always defer defer+madvise [madvise] never\n"},
      {"/proc/sys/kernel/numa_balancing", "1\n"},
      {"/proc/sys/vm/compaction_proactiveness", "20\n"},
      {"/proc/sys/vm/compact_unevictable_allowed", "1\n"},
      {"/proc/cmdline", "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda2 ro quiet\n"},
      {"/sys/class/iommu/ivhd0/uevent", ""},
      {"/sys/class/iommu/ivhd1/uevent", ""},
      {"/proc/meminfo", "MemTotal:       " + std::to_string(mi300a_mem_total_kib) +
                            " kB\nMemFree:        500000000 kB\nMemAvailable:   510000000 kB\n"},
  };
}

umem::error knobs_error(const fs_root& root) {
  try {
    read_kernel_knobs(root);
  } catch (const umem::error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return umem::error(errc::internal, "");
}

TEST(KernelKnobs, Mi300aAsShipped) {
  UMEM_REQUIRE_FIXTURE(path, "modparam_amdttm_pages_limit_mi300a_ROCm-ROCm_PR3648.txt");
  std::istringstream in(test::read_text(path));
  std::string line, pages_limit_text;
  // Line 5 is the `cat /sys/module/amdttm/parameters/pages_limit` prompt; line 6 its output.
  while (std::getline(in, line))
    if (line.ends_with("cat /sys/module/amdttm/parameters/pages_limit")) std::getline(in, pages_limit_text);
  ASSERT_FALSE(pages_limit_text.empty());
  test::sysfs_tree tree(mi300a_as_shipped(pages_limit_text + "\n"));
  const kernel_knobs k = read_kernel_knobs(tree.root());
  EXPECT_EQ(k.ttm_module, "amdttm");
  EXPECT_EQ(k.ttm_pages_limit, 98540199u);  // capture line 6
  EXPECT_FALSE(k.ttm_page_pool_size.has_value());
  EXPECT_EQ(k.amdgpu_noretry, 1);
  EXPECT_EQ(k.thp_enabled, "madvise");
  EXPECT_EQ(k.thp_defrag, "madvise");
  EXPECT_EQ(k.numa_balancing, 1);
  EXPECT_EQ(k.compaction_proactiveness, 20);
  EXPECT_EQ(k.compact_unevictable_allowed, 1);
  EXPECT_EQ(k.iommu, iommu_mode::translated);
  EXPECT_NE(k.iommu_evidence.find("ivhd0, ivhd1"), std::string::npos) << k.iommu_evidence;
  EXPECT_EQ(k.mem_total_bytes, mi300a_mem_total_kib * 1024);
}

TEST(KernelKnobs, UpstreamTtm) {
  test::sysfs_tree tree({{ttm + "pages_limit", "33554432\n"}, {ttm + "page_pool_size", "16777216\n"},
                         {ttm + "dma32_pages_limit", "524288\n"}});
  const kernel_knobs k = read_kernel_knobs(tree.root());
  EXPECT_EQ(k.ttm_module, "ttm");
  EXPECT_EQ(k.ttm_pages_limit, 33554432u);
  EXPECT_EQ(k.ttm_page_pool_size, 16777216u);
}

TEST(KernelKnobs, AmdttmWinsOverTtmLoadedForAnotherDriver) {
  test::sysfs_tree tree({{ttm + "pages_limit", "1000\n"}, {ttm + "page_pool_size", "1000\n"},
                         {amdttm + "pages_limit", "134217728\n"},
                         {amdttm + "page_pool_size", "134217728\n"}});
  const kernel_knobs k = read_kernel_knobs(tree.root());
  EXPECT_EQ(k.ttm_module, "amdttm");
  EXPECT_EQ(k.ttm_pages_limit, 134217728u);
  EXPECT_EQ(k.ttm_page_pool_size, 134217728u);
}

TEST(KernelKnobs, EverythingMissingIsNulloptNotAnError) {
  test::sysfs_tree tree;
  const kernel_knobs k = read_kernel_knobs(tree.root());
  kernel_knobs expected;
  expected.iommu_evidence = k.iommu_evidence;
  EXPECT_EQ(k, expected);
  EXPECT_EQ(k.iommu, iommu_mode::unknown);
  EXPECT_NE(k.iommu_evidence.find("/sys/class/iommu is absent"), std::string::npos);
}

TEST(KernelKnobs, NoretryMinusOneIsTheAutoValue) {
  test::sysfs_tree tree({{"/sys/module/amdgpu/parameters/noretry", "-1\n"}});
  EXPECT_EQ(read_kernel_knobs(tree.root()).amdgpu_noretry, -1);
}

TEST(KernelKnobs, GarbageIsAParseErrorNamingTheFile) {
  const std::pair<std::string, std::string> cases[] = {
      {"/sys/module/amdgpu/parameters/noretry", "Y\n"},
      {amdttm + "pages_limit", "-5\n"},
      {ttm + "page_pool_size", "12 pages\n"},
      {thp + "enabled", "always madvise never\n"},
      {thp + "defrag", "[always] [never]\n"},
      {"/proc/sys/kernel/numa_balancing", "on\n"},
      {"/proc/sys/vm/compaction_proactiveness", "20%\n"},
      {"/proc/sys/vm/compact_unevictable_allowed", "\n"},
      {"/proc/meminfo", "MemTotal:       lots kB\n"},
      {"/proc/meminfo", "MemFree: 12 kB\n"},
  };
  for (const auto& [file, content] : cases) {
    SCOPED_TRACE(file + " = " + content);
    test::sysfs_tree tree({{file, content}});
    const umem::error e = knobs_error(tree.root());
    EXPECT_EQ(e.code(), errc::parse_error);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

struct iommu_case {
  const char* what;
  std::map<std::string, std::string> files;
  iommu_mode mode;
  const char* evidence;  // a substring of iommu_evidence
};

TEST(KernelKnobs, IommuModes) {
  const std::string units = "/sys/class/iommu/ivhd0/uevent";
  const iommu_case cases[] = {
      {"pt on the command line", {{units, ""}, {"/proc/cmdline", "ro iommu=pt quiet\n"}},
       iommu_mode::passthrough, "iommu=pt"},
      {"passthrough by iommu.passthrough=1", {{units, ""}, {"/proc/cmdline", "iommu.passthrough=1\n"}},
       iommu_mode::passthrough, "iommu.passthrough=1"},
      {"units without pt", {{units, ""}, {"/proc/cmdline", "ro quiet\n"}}, iommu_mode::translated,
       "no iommu=pt"},
      {"pt then nopt: the last word wins", {{units, ""}, {"/proc/cmdline", "iommu=pt iommu=nopt\n"}},
       iommu_mode::translated, "no iommu=pt"},
      {"pt after -- belongs to init", {{units, ""}, {"/proc/cmdline", "ro -- iommu=pt\n"}},
       iommu_mode::translated, "no iommu=pt"},
      {"group type identity without cmdline",
       {{units, ""}, {"/sys/kernel/iommu_groups/0/type", "identity\n"},
        {"/sys/kernel/iommu_groups/1/type", "identity\n"}},
       iommu_mode::passthrough, "2 IOMMU groups have default domain type identity"},
      {"group type DMA-FQ outweighs the command line",
       {{units, ""}, {"/sys/kernel/iommu_groups/0/type", "identity\n"},
        {"/sys/kernel/iommu_groups/3/type", "DMA-FQ\n"}, {"/proc/cmdline", "iommu=pt\n"}},
       iommu_mode::translated, "group 3 has default domain type DMA-FQ"},
      {"amd_iommu=off", {{"/proc/cmdline", "ro amd_iommu=off\n"}}, iommu_mode::off, "amd_iommu=off"},
      {"iommu=off in a list", {{"/proc/cmdline", "iommu=soft,off\n"}}, iommu_mode::off, "iommu=soft,off"},
      {"no units registered", {{"/sys/class/iommu/.keep", ""}, {"/proc/cmdline", "ro\n"}},
       iommu_mode::off, "no IOMMU unit is registered"},
      {"pt requested, nothing to check", {{"/proc/cmdline", "iommu=pt\n"}}, iommu_mode::passthrough,
       "/sys/class/iommu is absent"},
      {"no evidence", {{"/proc/cmdline", "ro quiet\n"}}, iommu_mode::unknown, "/sys/class/iommu is absent"},
  };
  for (const iommu_case& c : cases) {
    SCOPED_TRACE(c.what);
    test::sysfs_tree tree(c.files);
    if (c.files.count("/sys/class/iommu/.keep") != 0) tree.remove("/sys/class/iommu/.keep");
    const kernel_knobs k = read_kernel_knobs(tree.root());
    EXPECT_EQ(k.iommu, c.mode) << to_string(k.iommu) << ": " << k.iommu_evidence;
    EXPECT_NE(k.iommu_evidence.find(c.evidence), std::string::npos) << k.iommu_evidence;
  }
}

TEST(KernelKnobs, LiveMachine) {
  const kernel_knobs k = read_kernel_knobs(fs_root("/"));
  ASSERT_TRUE(k.thp_enabled.has_value()) << "a Linux machine has transparent_hugepage/enabled";
  EXPECT_TRUE(*k.thp_enabled == "always" || *k.thp_enabled == "madvise" || *k.thp_enabled == "never")
      << *k.thp_enabled;
  ASSERT_TRUE(k.mem_total_bytes.has_value());
  EXPECT_GT(*k.mem_total_bytes, 0u);
  EXPECT_EQ(*k.mem_total_bytes % 1024, 0u) << "MemTotal is in kB";
  EXPECT_FALSE(k.iommu_evidence.empty());
}

}  // namespace
}  // namespace umem::hsa
