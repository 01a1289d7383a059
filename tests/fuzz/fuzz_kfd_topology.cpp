// libFuzzer target: the KFD sysfs text parsers (hsa_runtime/kfd_topology.hpp) return or throw
// umem::error; anything else (another exception, a crash, a sanitizer report, nodes that do not
// survive a snapshot) is a finding. Each input goes three ways:
//  - parse_kfd_properties: the input as one properties file;
//  - import_kfd_properties_dump: the input as a `cat nodes/*/properties` capture;
//  - read_kfd_topology: the input as a sysfs tree under a temporary root. Lines
//    "=== <path>" start a file at topology/<path> (components [A-Za-z0-9_], at most 6, so the
//    tree stays inside the root); text before the first such line is nodes/0/properties. This
//    reaches the mem_banks and io_links parsers, gpu_id and generation_id.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "round_trip.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace {

namespace fs = std::filesystem;

constexpr std::string_view marker = "=== ";

// A temporary root made once per process and removed at exit.
const fs::path& tree_root() {
  static const fs::path root = [] {
    std::string dir = (fs::temp_directory_path() / "umem-fuzz-kfd.XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) std::abort();
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(tree_root(), ec);
    });
    return fs::path(dir);
  }();
  return root;
}

bool safe_relative_path(std::string_view p) {
  int components = 0;
  std::size_t length = 0;
  for (char c : p) {
    if (c == '/') {
      if (length == 0) return false;
      ++components;
      length = 0;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_') {
      ++length;
    } else {
      return false;
    }
  }
  return length != 0 && components < 6;
}

void write_file(const fs::path& topology, std::string_view rel, std::string_view text) {
  if (!safe_relative_path(rel)) return;
  const fs::path path = topology / rel;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec || fs::is_directory(path, ec)) return;  // a path used both as a file and a directory
  std::ofstream(path, std::ios::binary) << text;
}

// The input as a tree (see the header). The text before the first marker is written only when
// there is some, so an input made of sections alone does not get an empty nodes/0 as well.
void build_tree(std::string_view text) {
  const fs::path topology = tree_root() / "sys/class/kfd/kfd/topology";
  std::error_code ec;
  fs::remove_all(tree_root() / "sys", ec);
  std::string_view rel = "nodes/0/properties";
  bool leading = true;
  std::size_t begin = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    if (line.starts_with(marker)) {
      if (!leading || pos > begin) write_file(topology, rel, text.substr(begin, pos - begin));
      leading = false;
      rel = line.substr(marker.size());
      begin = std::min(eol + 1, text.size());
    }
    pos = eol + 1;
  }
  if (!leading || begin < text.size()) write_file(topology, rel, text.substr(begin));
}

void check(const std::vector<umem::kfd_node>& nodes) {
  umem::topology t;
  t.kfd_nodes = nodes;
  umem::fuzz::check_snapshot_round_trip(t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)umem::hsa::parse_kfd_properties(text, "fuzz");
  } catch (const umem::error&) {
  }
  try {
    check(umem::hsa::import_kfd_properties_dump(text, "fuzz"));
  } catch (const umem::error&) {
  }
  build_tree(text);
  try {
    umem::hsa::kfd_scan_options once;
    once.max_attempts = 1;  // the tree does not change under the scan
    check(umem::hsa::read_kfd_topology(umem::fs_root(tree_root()), once));
  } catch (const umem::error&) {
  }
  return 0;
}
