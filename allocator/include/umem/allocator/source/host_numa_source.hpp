// Fresh host memory on chosen NUMA nodes: anonymous mmap, mbind before first touch, THP advice,
// optional population. The bottom upstream_source of the allocator (segment.hpp).
//
// Note [Order of the calls]
// 1. mmap size + 2 MiB without MAP_POPULATE, trim the unaligned head and tail: the segment is
//    2 MiB aligned and a multiple of 2 MiB, so every huge page of it can be a THP and interleave
//    splits it evenly.
// 2. madvise(MADV_HUGEPAGE), or MADV_NOHUGEPAGE when huge pages are off (so THP "always" does
//    not bring them back).
// 3. mbind: MPOL_BIND with MPOL_MF_STRICT|MPOL_MF_MOVE, MPOL_PREFERRED (one node), or
//    MPOL_INTERLEAVE over the set. The policy applies only to pages faulted after it.
// 4. Population, so the first GPU access does not fault page by page:
//    - touch: one byte written per page from a thread pinned to the target node's CPUs (for
//      interleave, or a node without CPUs, from the calling thread: the policy decides);
//    - map_populate: NOT mmap's MAP_POPULATE, which faults every page at mmap time, before mbind
//      could apply. Instead madvise(MADV_POPULATE_WRITE) after mbind (Linux 5.14+), falling back
//      to touch when the kernel answers EINVAL. Unlike touching, it reports a node that cannot
//      back the range as an error instead of a SIGBUS where the kernel can fail it.
//    Before steps 3-4 of a strict (bind) binding, the nodes' obtainable memory is checked: a range
//    they cannot back is out_of_memory, since the kernel's answer to a bound range past a node's
//    end is the OOM killer, never ENOMEM (Note [The real end of a node] in node_meminfo.hpp).
// Any failure unmaps what was mapped before throwing, so nothing leaks.
//
// Growable segments (segment.hpp, Note [Growable segments]): allocate_growable() reserves the
// whole range as address space (PROT_NONE, MAP_NORESERVE: neither backed nor charged), 2 MiB
// aligned, and commits the first part with mmap(MAP_FIXED, PROT_READ|PROT_WRITE) inside it, so
// it is charged and zeroed exactly like a plain segment; steps 2-4 then run on that part. grow()
// commits the next range the same way and runs steps 2-4 on it with the segment's binding and
// huge-page setting (so get_mempolicy on a grown page answers the segment's policy); if a step
// fails the range goes back to reserved address space. deallocate() unmaps the reservation.
//
// Thread-safe: the source keeps no mutable state.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "umem/allocator/placement.hpp"
#include "umem/allocator/source/segment.hpp"

namespace umem::alloc {

struct host_source_config {
  bool huge_pages = true;                     // MADV_HUGEPAGE (else MADV_NOHUGEPAGE)
  populate_mode populate = populate_mode::none;
};

class host_numa_source final : public upstream_source {
 public:
  static constexpr std::size_t granularity = std::size_t{2} << 20;  // size and alignment

  // Reads the NUMA nodes this process may allocate on once, here.
  explicit host_numa_source(host_source_config config = {});

  // Throws errc::invalid_argument for bytes == 0, a size that overflows when rounded up, an
  // empty node set, a preferred binding with more than one node, or a node that does not exist
  // (the message names the node and the nodes that exist); errc::out_of_memory when mmap or
  // population cannot get the memory. `kind` is recorded in the segment only: host memory is the
  // same for every coherence, the GPU side (gpu_mapper) makes the difference.
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  // The same, inside a reservation of `reserve_bytes` rounded up to 2 MiB (growable when that is
  // more than the segment's size; otherwise exactly allocate()).
  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override;
  // Commits, advises, binds and populates the next `extra_bytes` rounded up to 2 MiB of the
  // reservation. False when the segment is not growable or the reservation has too little left;
  // out_of_memory as allocate().
  bool grow(segment& s, std::size_t extra_bytes) override;
  bool decommit(const segment& s, void* p, std::size_t bytes) override;
  // Pages given back come back on touch; a bound range the node cannot back any more is
  // out_of_memory (Note [The real end of a node]), and with populate set they are populated.
  void recommit(const segment& s, void* p, std::size_t bytes) override;
  // munmap of the whole reservation; a failure is logged, never thrown.
  void deallocate(const segment& s) noexcept override;
  // "host NUMA memory (mmap+mbind, THP on)", plus ", populate=touch" when populating.
  std::string describe() const override;

  const host_source_config& config() const { return config_; }

 private:
  void check_binding(const node_binding& where) const;
  void check_room(std::size_t size, const node_binding& where) const;
  void populate(void* base, std::size_t size, const node_binding& where) const;
  void set_up(void* base, std::size_t size, segment& s) const;

  host_source_config config_;
  std::vector<int> nodes_;  // allowed NUMA nodes, ascending
};

}  // namespace umem::alloc
