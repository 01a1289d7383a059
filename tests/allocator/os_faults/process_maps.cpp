#include "process_maps.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace umem::test {
namespace {

// Parses "start-end perms offset dev inode [path]".
vma parse_line(const char* line, const char* end) {
  vma v;
  char* p = nullptr;
  v.start = std::strtoull(line, &p, 16);
  v.end = std::strtoull(p + 1, &p, 16);
  ++p;
  v.readable = p[0] == 'r';
  v.writable = p[1] == 'w';
  // Skip perms, offset, dev; then the inode, then the path (possibly empty).
  for (int field = 0; field < 3; ++field) {
    while (p < end && *p != ' ') ++p;
    while (p < end && *p == ' ') ++p;
  }
  const unsigned long long inode = std::strtoull(p, &p, 10);
  while (p < end && *p == ' ') ++p;
  v.anonymous = inode == 0 && p == end;
  return v;
}

}  // namespace

std::vector<vma> read_process_maps() {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("/proc/self/maps: ") + std::strerror(errno));
  std::string text;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  std::vector<vma> out;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(parse_line(text.data() + at, text.data() + nl));
    at = nl + 1;
  }
  return out;
}

anonymous_total anonymous_mappings(const std::vector<vma>& maps) {
  anonymous_total t;
  for (const vma& v : maps) {
    if (!v.anonymous) continue;
    t.bytes += v.end - v.start;
    ++t.count;
  }
  return t;
}

std::size_t mapped_bytes_in(const std::vector<vma>& maps, std::uintptr_t lo, std::uintptr_t hi,
                            bool rw_only) {
  std::size_t bytes = 0;
  for (const vma& v : maps) {
    if (rw_only && !(v.readable && v.writable)) continue;
    const std::uintptr_t a = std::max(lo, v.start), b = std::min(hi, v.end);
    if (a < b) bytes += b - a;
  }
  return bytes;
}

bool unmap_splits(const std::vector<vma>& maps, std::uintptr_t lo, std::uintptr_t hi) {
  return std::any_of(maps.begin(), maps.end(), [&](const vma& v) {
    return (v.start < lo && lo < v.end) || (v.start < hi && hi < v.end);
  });
}

}  // namespace umem::test
