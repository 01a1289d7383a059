// Every sysfs/procfs read goes through an fs_root, so tests and replays can point it at a
// captured tree (like hwloc's HWLOC_FSROOT). Paths passed in are absolute paths of a live system
// ("/sys/class/kfd/kfd/topology"); the root is prefixed to them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace umem {

class fs_root {
 public:
  // "/" is the live machine. Throws umem::error(not_found) if `root` is not a directory.
  explicit fs_root(std::filesystem::path root = "/");

  const std::filesystem::path& root() const { return root_; }

  std::filesystem::path resolve(const std::string& abs_path) const;
  bool exists(const std::string& abs_path) const;
  // Whole file, or nullopt if it does not exist. Other read errors throw umem::error(io_error).
  std::optional<std::string> read(const std::string& abs_path) const;
  // First line without trailing whitespace, or nullopt if missing.
  std::optional<std::string> read_line(const std::string& abs_path) const;
  // Names of entries in a directory, sorted; empty if the directory does not exist.
  std::vector<std::string> list(const std::string& abs_dir) const;

 private:
  std::filesystem::path root_;
};

}  // namespace umem
