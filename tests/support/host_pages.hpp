// What the kernel's page tables say of a host range, from /proc/self/maps: what the GPU runtime
// doubles check before they pin user memory (rules and sources at their call sites: Note [What a
// lock pins] in rocr_double/double_memory.cpp, cuMemHostRegister in cuda_double/cuda_double.cpp).
// Header-only: the doubles are shared libraries of their own.
#pragma once

#include <sys/vfs.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace umem::test {

struct host_pages {
  bool mapped = true;    // every page of the range is mapped
  bool writable = true;  // every mapped page is writable
  // Some page is a shared mapping of a file outside tmpfs (/dev/shm and memfds are tmpfs).
  bool shared_file = false;
};

inline bool on_tmpfs(std::string path) {
  constexpr long tmpfs_magic = 0x01021994;
  if (const auto d = path.rfind(" (deleted)"); d != std::string::npos) path.resize(d);
  if (path.starts_with("/memfd:")) return true;
  struct statfs fs {};
  if (statfs(path.c_str(), &fs) != 0) {  // unlinked: the folder it was in
    const auto slash = path.rfind('/');
    if (slash == std::string::npos || statfs(path.substr(0, slash).c_str(), &fs) != 0) return false;
  }
  return fs.f_type == tmpfs_magic;
}

// The pages of [start, start + size), rounded out to whole pages.
inline host_pages inspect_host_pages(std::uintptr_t start, std::size_t size) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  std::uintptr_t at = start / page * page;
  const std::uintptr_t end = (start + size + page - 1) / page * page;
  host_pages out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (at < end && std::getline(maps, line)) {
    std::istringstream in(line);
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::string perms, offset, device, path;
    unsigned long inode = 0;
    in >> std::hex >> lo >> dash >> hi >> perms >> offset >> device >> std::dec >> inode;
    std::getline(in >> std::ws, path);
    if (hi <= at) continue;
    if (lo > at) break;  // a hole at `at`
    if (perms.size() < 4 || perms[1] != 'w') out.writable = false;
    if (perms.size() >= 4 && perms[3] == 's' && inode != 0 && !on_tmpfs(path))
      out.shared_file = true;
    at = hi;
  }
  out.mapped = at >= end;
  return out;
}

}  // namespace umem::test
