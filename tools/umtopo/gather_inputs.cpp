#include "gather_inputs.hpp"

#include <filesystem>
#include <set>

#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace fs = std::filesystem;

namespace umem::umtopo {
namespace {

// Deep enough for topology/nodes/N/mem_banks/M/properties and node/nodeN/hugepages/H/file.
constexpr int kMaxDepth = 6;

class collector {
 public:
  collector(const fs_root& root) : root_(root) {}

  void file(const std::string& path) {
    try {
      if (auto text = root_.read(path)) {
        add(path, false, std::move(*text));
        return;
      }
    } catch (const error& e) {
      out_.unreadable.push_back(path + ": " + e.what());
      return;
    }
    out_.absent.push_back(path);
  }

  // Regular files under `dir` (down to `depth` levels) that `keep` accepts by name.
  template <class Keep>
  void tree(const std::string& dir, int depth, const Keep& keep) {
    if (!is_dir(dir)) {
      out_.absent.push_back(dir);
      return;
    }
    walk(dir, depth, keep);
  }
  void tree(const std::string& dir, int depth = kMaxDepth) {
    tree(dir, depth, [](const std::string&) { return true; });
  }

  // The names in `dir` as empty directories (what fs_root::list returns for /sys/class/iommu).
  void names(const std::string& dir) {
    if (!is_dir(dir)) {
      out_.absent.push_back(dir);
      return;
    }
    add(dir, true, {});
    for (const std::string& name : root_.list(dir)) add(dir + "/" + name, true, {});
  }

  bool is_dir(const std::string& path) const {
    std::error_code ec;
    return fs::is_directory(root_.resolve(path), ec);
  }

  raw_inputs take() { return std::move(out_); }

 private:
  template <class Keep>
  void walk(const std::string& dir, int depth, const Keep& keep) {
    add(dir, true, {});
    for (const std::string& name : root_.list(dir)) {
      const std::string path = dir + "/" + name;
      std::error_code ec;
      const auto status = fs::symlink_status(root_.resolve(path), ec);
      if (ec || fs::is_symlink(status) || !keep(name)) continue;
      if (fs::is_directory(status)) {
        if (depth > 1) walk(path, depth - 1, keep);
      } else if (fs::is_regular_file(status)) {
        file(path);
      }
    }
  }

  void add(const std::string& abs_path, bool directory, std::string content) {
    std::string name = abs_path.substr(abs_path.find_first_not_of('/'));
    if (!seen_.insert(name).second) return;
    out_.entries.push_back({std::move(name), directory, std::move(content)});
  }

  const fs_root& root_;
  raw_inputs out_;
  std::set<std::string> seen_;
};

bool numbered(const std::string& name, const char* prefix) {
  const std::string p = prefix;
  return name.size() > p.size() && name.starts_with(p) &&
         name.find_first_not_of("0123456789", p.size()) == std::string::npos;
}

void numa_and_cpus(collector& c) {
  // nodeN's own files; its cpuN/memoryN links and per-node statistics are not NUMA inputs.
  const std::set<std::string> node_files = {"cpulist", "cpumap", "distance", "meminfo", "hugepages",
                                            "nr_hugepages", "free_hugepages"};
  c.tree("/sys/devices/system/node", 4, [&](const std::string& name) {
    return numbered(name, "node") || node_files.count(name) || name.starts_with("hugepages-") ||
           name == "possible" || name == "online" || name.starts_with("has_");
  });
  c.tree("/sys/devices/system/cpu", 3, [](const std::string& name) {
    return numbered(name, "cpu") || name == "topology" || name == "online" || name == "possible" ||
           name == "present" || name.ends_with("_id") || name.ends_with("_list") || name.ends_with("_cpus");
  });
}

}  // namespace

raw_inputs collect_raw_inputs(const fs_root& root, const topology& runtime) {
  collector c(root);
  // kfd_topology.cpp reads the fallback only where the class link is missing.
  c.tree(c.is_dir(hsa::kfd_topology_fallback_path) && !c.is_dir(hsa::kfd_topology_path) ? hsa::kfd_topology_fallback_path
                                                                                         : hsa::kfd_topology_path);
  for (const char* module : {"amdgpu", "amdttm", "ttm"}) c.tree(std::string("/sys/module/") + module + "/parameters", 1);
  c.tree("/sys/kernel/mm/transparent_hugepage", 1);
  for (const char* f : {"/proc/sys/kernel/numa_balancing", "/proc/sys/vm/compaction_proactiveness",
                        "/proc/sys/vm/compact_unevictable_allowed", "/proc/meminfo", "/proc/cmdline"})
    c.file(f);
  c.names("/sys/class/iommu");
  c.tree("/sys/kernel/iommu_groups", 2, [](const std::string& name) {
    return name == "type" || name.find_first_not_of("0123456789") == std::string::npos;
  });
  numa_and_cpus(c);
  for (const agent* g : runtime.gpus()) {
    if (g->bdfid == 0) continue;  // no PCI address: gpu_numa_mapping.cpp skips it too
    const std::string dir = "/sys/bus/pci/devices/" + g->pci_address();
    for (const char* f : {"/numa_node", "/local_cpus", "/local_cpulist"}) c.file(dir + f);
  }
  return c.take();
}

}  // namespace umem::umtopo
