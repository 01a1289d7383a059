// Fake sysfs/procfs trees for tests: a throwaway directory that stands in for "/" of another
// machine, written from a map of absolute system path -> file content, and read back through
// umem::fs_root exactly as a captured tree would be.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "umem/core/fs_root.hpp"

namespace umem::test {

class sysfs_tree {
 public:
  // Creates a fresh directory under the system temp directory holding `files`.
  explicit sysfs_tree(const std::map<std::string, std::string>& files = {});
  sysfs_tree(std::initializer_list<std::pair<const std::string, std::string>> files)
      : sysfs_tree(std::map<std::string, std::string>(files)) {}
  ~sysfs_tree();
  sysfs_tree(const sysfs_tree&) = delete;
  sysfs_tree& operator=(const sysfs_tree&) = delete;

  // Paths are absolute paths of the imitated system ("/proc/cmdline"); parents are created.
  void write(const std::string& abs_path, std::string_view content) const;
  void make_dir(const std::string& abs_path) const;
  void remove(const std::string& abs_path) const;  // a file or a whole directory

  const std::filesystem::path& path() const { return dir_; }
  umem::fs_root root() const { return umem::fs_root(dir_); }

 private:
  std::filesystem::path dir_;
};

// The per-node texts of a real `cat /sys/class/kfd/kfd/topology/nodes/*/properties` capture:
// the lines after that command, split at the "-----" separator lines, each kept verbatim
// (with its newlines). Throws std::runtime_error if the command line is not in the capture.
std::vector<std::string> kfd_properties_blocks(const std::string& capture_text);

// The files of /sys/class/kfd/kfd/topology for those texts: nodes/<i>/properties = blocks[i]
// and generation_id = `generation`. Only valid for up to 10 nodes, where the shell's glob order
// of nodes/* is numeric order (throws std::runtime_error beyond).
std::map<std::string, std::string> kfd_tree_files(const std::vector<std::string>& blocks,
                                                  unsigned generation = 1);

}  // namespace umem::test
