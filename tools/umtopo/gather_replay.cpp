#include "gather_replay.hpp"

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "gather.hpp"
#include "tar_gz.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/hsa_runtime/kernel_knobs.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/numa/sysfs_numa_source.hpp"

namespace fs = std::filesystem;

namespace umem::umtopo {
namespace {

// A fresh directory, removed with everything in it when this goes out of scope.
class temp_tree {
 public:
  temp_tree() {
    std::string pattern = (fs::temp_directory_path() / "umtopo-gather-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw_errno(errc::io_error, "cannot create a directory for the gather", errno);
    dir_ = pattern;
  }
  ~temp_tree() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  temp_tree(const temp_tree&) = delete;
  temp_tree& operator=(const temp_tree&) = delete;
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

const tar_entry* find_entry(const std::vector<tar_entry>& entries, const std::string& name) {
  for (const auto& e : entries)
    if (e.name == name && !e.directory) return &e;
  return nullptr;
}

void extract_root(const std::vector<tar_entry>& entries, const fs::path& dir) {
  const std::string prefix = std::string(kRootEntry) + "/";
  fs::create_directories(dir);
  for (const auto& e : entries) {
    if (!e.name.starts_with(prefix)) continue;
    const fs::path p = dir / e.name.substr(prefix.size());
    if (e.directory) {
      fs::create_directories(p);
      continue;
    }
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << e.content;
    if (!out) throw_error(errc::io_error, "cannot unpack " + e.name + " into " + p.string());
  }
}

}  // namespace

replayed_gather replay_gather(const fs::path& file) {
  const std::vector<tar_entry> entries = read_tar_gz(file);
  const auto need = [&](const char* name) -> const tar_entry& {
    const tar_entry* e = find_entry(entries, name);
    if (e == nullptr)
      throw_error(errc::parse_error, file.string() + " has no " + name + "; not a gather written by umtopo --gather");
    return *e;
  };
  replayed_gather out;
  out.manifest = manifest_from_json(need(kManifestEntry).content, file.string() + ":" + kManifestEntry);

  topology& t = out.topo;
  const topology recorded = snapshot_from_json(need(kRuntimeEntry).content, file.string() + ":" + kRuntimeEntry);
  t.hostname = recorded.hostname;
  t.hsa = recorded.hsa;
  t.agents = recorded.agents;
  t.cuda = recorded.cuda;
  t.gpu_backend = recorded.gpu_backend;

  const temp_tree tree;
  extract_root(entries, tree.path() / kRootEntry);
  const fs_root root(tree.path() / kRootEntry);
  t.kfd_nodes = hsa::read_kfd_topology(root);
  t.knobs = hsa::read_kernel_knobs(root);
  t.numa = numa::read_sysfs_numa(root);
  t.gpu_numa = numa::map_gpus_to_numa(t, &root);
  // The mapping names the files it read; name them as on the node, not in the temporary tree.
  const std::string tree_prefix = root.root().string();
  for (auto& b : t.gpu_numa)
    for (std::size_t at; (at = b.evidence.find(tree_prefix)) != std::string::npos;) b.evidence.erase(at, tree_prefix.size());
  t.sources.push_back("gather:" + file.filename().string());
  return out;
}

}  // namespace umem::umtopo
