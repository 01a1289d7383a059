#include "umem_mappings.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "os_call_faults.hpp"
#include "process_maps.hpp"

namespace umem::test {
namespace {

// The union of the ranges umem's mmaps returned (an address may be handed out twice in a run).
std::vector<os_faults::range> merged(std::vector<os_faults::range> r) {
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.lo < b.lo; });
  std::vector<os_faults::range> out;
  for (const auto& x : r) {
    if (!out.empty() && x.lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, x.hi);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

std::size_t resident_in(std::uintptr_t lo, std::uintptr_t hi) {
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((hi - lo + page - 1) / page);
  if (::mincore(reinterpret_cast<void*>(lo), hi - lo, in_core.data()) != 0)
    throw std::runtime_error(std::string("mincore: ") + std::strerror(errno));
  return static_cast<std::size_t>(std::count_if(in_core.begin(), in_core.end(),
                                                [](unsigned char c) { return c & 1; })) *
         page;
}

}  // namespace

std::size_t umem_mapped_bytes(bool rw_only) {
  const auto maps = read_process_maps();
  std::size_t bytes = 0;
  for (const auto& r : merged(os_faults::mapped_ranges()))
    bytes += mapped_bytes_in(maps, r.lo, r.hi, rw_only);
  return bytes;
}

std::size_t umem_resident_bytes() {
  const auto maps = read_process_maps();
  std::size_t bytes = 0;
  for (const auto& r : merged(os_faults::mapped_ranges()))
    for (const vma& v : maps) {
      if (!(v.readable && v.writable)) continue;
      const std::uintptr_t a = std::max(r.lo, v.start), b = std::min(r.hi, v.end);
      if (a < b) bytes += resident_in(a, b);
    }
  return bytes;
}

}  // namespace umem::test
