// umem's own address space as the kernel sees it: the ranges umem's mmaps returned since
// os_faults::arm() (os_call_faults.hpp), measured in /proc/self/maps (process_maps.hpp) and,
// for pages given back with MADV_DONTNEED, by residency (mincore).
#pragma once

#include <cstddef>

namespace umem::test {

// Bytes mapped inside umem's ranges; only the readable-writable ones when `rw_only`.
std::size_t umem_mapped_bytes(bool rw_only);

// Bytes of resident pages inside umem's readable-writable mappings (mincore). A page given back
// with MADV_DONTNEED stays mapped read-write but is no longer resident until it is touched again.
std::size_t umem_resident_bytes();

}  // namespace umem::test
