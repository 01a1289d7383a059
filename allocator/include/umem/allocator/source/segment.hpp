// The unit of memory an upstream source hands to the caching pool, and the source interface.
//
// Note [Composition]
// Sources sit at the bottom (host_numa_source: mmap + mbind), adaptors wrap them
// (gpu_visible_source: also makes the range GPU-accessible through a gpu_mapper), and the caching
// pool sits on top. allocator.cpp is the one place where they are put together.
//
// Note [Growable segments]
// A source may hand out a segment that sits at the start of a larger reservation of address
// space (allocate_growable) and later commit more of that reservation right after the segment's
// end (grow), so the segment grows in place: its base stays, its size increases, and the caching
// pool can merge a free block at the segment's end with the new range (Note [Expandable segments]
// in caching_pool.hpp; PyTorch's expandable_segments has the same idea). The grown range gets
// the segment's binding, coherence kind and huge-page advice. A segment is growable when
// reserved_size > size; deallocate() of a growable or grown segment releases the whole
// reservation. Sources that cannot grow keep the defaults: allocate_growable() is allocate()
// and grow() answers false, so callers fall back to new segments. Adaptors forward both calls
// (limiting_source charges a growth like a new segment; gpu_visible_source maps each grown piece
// and unmaps every piece at deallocate, and refuses growth where its mapper pins memory:
// Note [Pinned memory does not grow] in gpu_visible_source.hpp).
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
  // Address space reserved at base for grow(), >= size; 0: not growable (Note [Growable segments]).
  std::size_t reserved_size = 0;
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

  // Like allocate(), asking for a segment that can later grow in place up to `reserve_bytes`
  // (>= bytes; Note [Growable segments]). The result is growable only if its reserved_size >
  // size; the default, for sources that cannot grow, is allocate(bytes, where, kind).
  virtual segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                    const node_binding& where, coherence kind) {
    (void)reserve_bytes;
    return allocate(bytes, where, kind);
  }
  // Commits [s.base + s.size, s.base + s.size + extra_bytes rounded up to the source's
  // granularity) with s's binding and kind and adds it to s.size. Returns false, changing
  // nothing, when `s` cannot grow that far (not growable, or its reservation is exhausted);
  // throws umem::error(out_of_memory) when the memory is not there, leaving `s` unchanged. Must
  // tolerate that range being committed already (a growth an adaptor could not complete and
  // forgot). `s` must be a segment of this source (as the caller last saw it). The default
  // answers false.
  virtual bool grow(segment& s, std::size_t extra_bytes) {
    (void)s;
    (void)extra_bytes;
    return false;
  }
  // Note [Decommitted pages]
  // Gives the memory of the whole pages [p, p + bytes) inside `s` back to the system. Returns
  // false, changing nothing, when the source cannot: memory a GPU runtime has pinned (ROCr locks,
  // CUDA registrations) must keep its pages, and a plain device allocation has no pages of its
  // own to give. The default answers false. Before the caller hands any of that range out again
  // it calls recommit() on it. Host memory stays mapped with its binding, so the next touch backs
  // it again (zero-filled, on the same node(s)); recommit() checks that the node can still back
  // it and populates it where the source populates fresh memory; device memory given back is
  // unmapped, so recommit() maps it again. Limits (limiting_source) keep charging
  // decommitted pages: they come back when the caller takes them again.
  virtual bool decommit(const segment& s, void* p, std::size_t bytes) {
    (void)s;
    (void)p;
    (void)bytes;
    return false;
  }
  // Makes [p, p + bytes) of `s`, given back by decommit() before (in whole or in part), usable
  // again. Throws umem::error(out_of_memory) when the memory is not there, keeping the range
  // given back. The default does nothing: pages come back on touch.
  virtual void recommit(const segment& s, void* p, std::size_t bytes) {
    (void)s;
    (void)p;
    (void)bytes;
  }
};

}  // namespace umem::alloc
