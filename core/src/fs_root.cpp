#include "umem/core/fs_root.hpp"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "umem/core/error.hpp"

namespace fs = std::filesystem;

namespace umem {

fs_root::fs_root(fs::path root) : root_(std::move(root)) {
  std::error_code ec;
  if (!fs::is_directory(root_, ec))
    throw_error(errc::not_found, "sysfs root '" + root_.string() +
                                     "' is not a directory; point it at a captured tree or /");
}

fs::path fs_root::resolve(const std::string& abs_path) const {
  std::string rel = abs_path;
  rel.erase(0, std::min(rel.find_first_not_of('/'), rel.size()));
  return root_ / rel;
}

bool fs_root::exists(const std::string& abs_path) const {
  std::error_code ec;
  return fs::exists(resolve(abs_path), ec);
}

std::optional<std::string> fs_root::read(const std::string& abs_path) const {
  const fs::path p = resolve(abs_path);
  std::error_code ec;
  if (!fs::exists(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_errno(errc::io_error, "cannot read " + p.string(), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  // sysfs attributes the process may not read (EACCES, EIO on some knobs) fail here.
  if (in.bad()) throw_errno(errc::io_error, "cannot read " + p.string(), errno);
  return ss.str();
}

std::optional<std::string> fs_root::read_line(const std::string& abs_path) const {
  auto text = read(abs_path);
  if (!text) return std::nullopt;
  std::string line = text->substr(0, text->find('\n'));
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

std::vector<std::string> fs_root::list(const std::string& abs_dir) const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(resolve(abs_dir), ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace umem
