// The unit of memory an upstream source hands to the caching pool, and the source interface.
//
// Note [Composition]
// Sources sit at the bottom (host_numa_source: mmap + mbind), adaptors wrap them
// (gpu_visible_source: also makes the range GPU-accessible through a gpu_mapper), and the caching
// pool sits on top. allocator.cpp is the one place where they are put together.
#pragma once

#include <cstddef>
#include <string>

#include "umem/allocator/placement.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc {

struct segment {
  void* base = nullptr;
  std::size_t size = 0;
  node_binding binding;          // what it was bound to
  coherence kind = coherence::fine;
  bool huge_pages = false;       // MADV_HUGEPAGE was applied
};

// Contract: allocate() returns a segment of at least `bytes` (rounded up to the source's
// granularity, reported in segment::size) or throws umem::error(errc::out_of_memory) when the
// memory is not there, and another umem::error for misuse. Thread-safe.
class upstream_source {
 public:
  virtual ~upstream_source() = default;
  virtual segment allocate(std::size_t bytes, const node_binding& where, coherence kind) = 0;
  virtual void deallocate(const segment& s) noexcept = 0;
  virtual std::string describe() const = 0;
};

}  // namespace umem::alloc
