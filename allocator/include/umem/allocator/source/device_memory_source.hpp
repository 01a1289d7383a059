// The upstream of a discrete GPU's device pool: memory of the GPU itself (Note [Device memory
// kinds] in machine/gpu_memory_kind.hpp), with the device's own view of how much is left.
//
// Segments of such a source are device addresses: the host must not touch them, and they carry
// no NUMA binding (the `where` and `kind` given to allocate() are recorded, not applied). The
// allocator puts a caching_pool directly on top, without limiting_source (limit.* are node
// limits) and without spill (device memory never falls back to host memory).
#pragma once

#include <cstdint>
#include <utility>

#include "umem/allocator/source/segment.hpp"

namespace umem::alloc {

class device_memory_source : public upstream_source {
 public:
  // {free, total} bytes of the device as its runtime reports them now (all processes counted).
  // Throws umem::error(runtime_error) naming the call that failed.
  virtual std::pair<std::uint64_t, std::uint64_t> memory_info() const = 0;
};

}  // namespace umem::alloc
