#include "support/sysfs_tree.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace umem::test {
namespace {

fs::path under(const fs::path& dir, const std::string& abs_path) {
  return dir / fs::path(abs_path).relative_path();
}

}  // namespace

sysfs_tree::sysfs_tree(const std::map<std::string, std::string>& files) {
  std::string pattern = (fs::temp_directory_path() / "umem-sysfs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("cannot create a temporary directory from " + pattern);
  dir_ = pattern;
  for (const auto& [path, content] : files) write(path, content);
}

sysfs_tree::~sysfs_tree() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

void sysfs_tree::write(const std::string& abs_path, std::string_view content) const {
  const fs::path p = under(dir_, abs_path);
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

void sysfs_tree::make_dir(const std::string& abs_path) const {
  fs::create_directories(under(dir_, abs_path));
}

void sysfs_tree::remove(const std::string& abs_path) const { fs::remove_all(under(dir_, abs_path)); }

std::vector<std::string> kfd_properties_blocks(const std::string& capture_text) {
  const std::string command = "cat /sys/class/kfd/kfd/topology/nodes/*/properties";
  std::istringstream in(capture_text);
  std::string line;
  bool found = false;
  while (!found && std::getline(in, line)) found = line.rfind(command, 0) == 0;
  if (!found) throw std::runtime_error("no '" + command + "' line in the capture");
  std::vector<std::string> blocks;
  std::string current;
  while (std::getline(in, line)) {
    if (line.rfind("---", 0) == 0) {
      if (!current.empty()) blocks.push_back(current);
      current.clear();
    } else {
      current += line + "\n";
    }
  }
  if (!current.empty()) blocks.push_back(current);
  return blocks;
}

std::map<std::string, std::string> kfd_tree_files(const std::vector<std::string>& blocks,
                                                  unsigned generation) {
  if (blocks.size() > 10)
    throw std::runtime_error("kfd_tree_files: more than 10 nodes, where nodes/* glob order is "
                             "not numeric order");
  const std::string topology = "/sys/class/kfd/kfd/topology";
  std::map<std::string, std::string> files{
      {topology + "/generation_id", std::to_string(generation) + "\n"}};
  for (std::size_t i = 0; i < blocks.size(); ++i)
    files[topology + "/nodes/" + std::to_string(i) + "/properties"] = blocks[i];
  return files;
}

}  // namespace umem::test
