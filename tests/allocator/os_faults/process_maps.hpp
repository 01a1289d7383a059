// This process's mappings as the kernel lists them in /proc/self/maps: what the fault injection
// test checks the allocator's own accounting against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace umem::test {

struct vma {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;
  bool readable = false;
  bool writable = false;
  bool anonymous = false;  // no file, no name ([heap], [stack] are named)
};

// Every line of /proc/self/maps, ascending. Throws std::runtime_error when it cannot be read.
std::vector<vma> read_process_maps();

// Bytes of anonymous mappings, and how many there are.
struct anonymous_total {
  std::size_t bytes = 0;
  std::size_t count = 0;
  bool operator==(const anonymous_total&) const = default;
};
anonymous_total anonymous_mappings(const std::vector<vma>& maps);

// Bytes of `maps` inside [lo, hi); only the readable-writable ones when `rw_only`.
std::size_t mapped_bytes_in(const std::vector<vma>& maps, std::uintptr_t lo, std::uintptr_t hi,
                            bool rw_only);

// Whether munmap(lo, hi - lo) would split a mapping (one starts before lo and ends inside, or
// ends after hi and starts inside): the only way munmap can fail for a valid range (ENOMEM once
// vm.max_map_count is reached).
bool unmap_splits(const std::vector<vma>& maps, std::uintptr_t lo, std::uintptr_t hi);

}  // namespace umem::test
