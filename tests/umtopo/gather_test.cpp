// write_gather + replay_gather on a tree that stands in for a node: the real 4-socket MI300A KFD
// properties (kfd_topology_properties_mi300a_4socket_unidentified_repo.txt, bundled) under
// /sys/class/kfd, NUMA nodes shaped like that node, and the runtime answers of the 4-socket
// rocminfo capture. The replay must give the model the live readers give for the same tree.
#include "gather.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "gather_replay.hpp"
#include "support/sysfs_tree.hpp"
#include "tar_gz.hpp"
#include "umem/core/error.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/hsa_runtime/kernel_knobs.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"
#include "umem/importers/rocminfo_importer.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/numa/sysfs_numa_source.hpp"
#include "support/fixtures.hpp"

namespace umem::umtopo {
namespace {

namespace fs = std::filesystem;

fs::path temp(const std::string& name) { return fs::temp_directory_path() / (name + "_" + std::to_string(getpid())); }

std::map<std::string, std::string> node_files() {
  const auto kfd = test::read_text(test::bundled_dir() / "kfd_topology_properties_mi300a_4socket_unidentified_repo.txt");
  auto out = test::kfd_tree_files(test::kfd_properties_blocks(kfd));
  for (int n = 0; n < 4; ++n) {
    const std::string dir = "/sys/devices/system/node/node" + std::to_string(n);
    out[dir + "/cpulist"] = std::to_string(24 * n) + "-" + std::to_string(24 * n + 23) + "\n";
    out[dir + "/meminfo"] = "Node " + std::to_string(n) + " MemTotal:  131268608 kB\nNode " + std::to_string(n) +
                            " MemFree:   120000000 kB\n";
    out[dir + "/distance"] = n == 0 ? "10 32 32 32\n" : n == 1 ? "32 10 32 32\n" : n == 2 ? "32 32 10 32\n" : "32 32 32 10\n";
    out[dir + "/hugepages/hugepages-2048kB/nr_hugepages"] = n == 3 ? "512\n" : "0\n";
  }
  out["/sys/module/amdttm/parameters/pages_limit"] = "98647808\n";
  out["/sys/kernel/mm/transparent_hugepage/enabled"] = "always [madvise] never\n";
  out["/proc/sys/kernel/numa_balancing"] = "1\n";
  out["/proc/meminfo"] = "MemTotal:       525074432 kB\n";
  out["/proc/cmdline"] = "BOOT_IMAGE=/vmlinuz iommu=pt\n";
  return out;
}

TEST(Gather, ReplayGivesWhatTheReadersGiveOnTheNode) {
  const fs::path rocminfo = test::bundled_dir() / "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt";
  ASSERT_TRUE(fs::exists(rocminfo)) << "bundled capture missing: " << rocminfo;
  const test::sysfs_tree tree(node_files());
  const fs_root root = tree.root();
  topology live = importers::import_rocminfo(test::read_text(rocminfo), "rocminfo").topo;
  live.hostname = "node17";
  live.kfd_nodes = hsa::read_kfd_topology(root);
  live.knobs = hsa::read_kernel_knobs(root);
  live.numa = numa::read_sysfs_numa(root);
  live.gpu_numa = numa::map_gpus_to_numa(live, &root);

  const fs::path file = temp("gather_node.tar.gz");
  const auto written = write_gather(file, root, live, std::string("rocminfo text\n"), "");
  const auto replay = replay_gather(file);
  EXPECT_EQ(replay.manifest, written);
  EXPECT_EQ(replay.topo.sources, std::vector<std::string>{"gather:" + file.filename().string()});
  topology expected = live;
  expected.sources = replay.topo.sources;
  EXPECT_EQ(replay.topo, expected);

  // The facts of the tree survive the trip: 8 KFD nodes, the TTM limit, node 3's huge pages.
  EXPECT_EQ(replay.topo.kfd_nodes.size(), 8u);
  EXPECT_EQ(replay.topo.knobs.ttm_pages_limit, 98647808u);
  ASSERT_EQ(replay.topo.numa.nodes.size(), 4u);
  EXPECT_EQ(replay.topo.numa.nodes[3].memory_total_bytes, (131268608ull - 512 * 2048) * 1024);
  EXPECT_EQ(replay.topo.numa.distances[1], (std::vector<std::uint32_t>{32, 10, 32, 32}));

  // What the archive holds, and that nothing else (no user file, no foreign variable) is in it.
  std::vector<std::string> names;
  for (const auto& e : read_tar_gz(file)) names.push_back(e.name);
  EXPECT_EQ(names[0], "manifest.json");
  EXPECT_EQ(names[1], "runtime.json");
  EXPECT_NE(std::find(names.begin(), names.end(), "rocminfo.txt"), names.end());
  for (const auto& n : names)
    EXPECT_TRUE(n == "manifest.json" || n == "runtime.json" || n == "rocminfo.txt" || n.starts_with("root")) << n;
  EXPECT_NE(std::find(written.absent.begin(), written.absent.end(), "/sys/module/amdgpu/parameters"), written.absent.end());
  for (const auto& [name, value] : written.umem_environment) EXPECT_TRUE(name.starts_with("UMEM_")) << name;
  fs::remove(file);
}

TEST(Gather, ReplayRefusesWhatIsNotAGather) {
  const fs::path file = temp("gather_bad.tar.gz");
  auto message = [&] {
    try {
      replay_gather(file);
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  write_tar_gz(file, {{"runtime.json", false, snapshot_to_json(topology{})}});
  EXPECT_NE(message().find("has no manifest.json"), std::string::npos) << message();

  gather_manifest m;
  m.version = kGatherVersion + 1;
  write_tar_gz(file, {{"manifest.json", false, manifest_to_json(m)}, {"runtime.json", false, snapshot_to_json(topology{})}});
  EXPECT_NE(message().find("is gather version 2; this umtopo reads version 1"), std::string::npos) << message();

  write_tar_gz(file, {{"manifest.json", false, manifest_to_json(gather_manifest{})}});
  EXPECT_NE(message().find("has no runtime.json"), std::string::npos) << message();

  write_tar_gz(file, {{"manifest.json", false, "{\"format\": \"umem-gather\", \"version\": 1}"},
                      {"runtime.json", false, snapshot_to_json(topology{})}});
  EXPECT_NE(message().find("manifest.json"), std::string::npos) << message();
  fs::remove(file);
}

}  // namespace
}  // namespace umem::umtopo
