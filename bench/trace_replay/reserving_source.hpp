// An upstream_source that reserves address space instead of committing memory, so a replay of a
// 15 GB training trace runs on a 24 GiB CI machine: anonymous mmap with MAP_NORESERVE and
// MADV_NOHUGEPAGE, so only the 4 KiB pages the integrity pattern touches are ever backed (with
// THP a touched word would back 2 MiB). Same granularity as host_numa_source (2 MiB), so the
// pool sees the same segment sizes as with the real source.
//
// Growable segments (segment.hpp): allocate_growable() reserves the whole range PROT_NONE and
// opens the first part with mprotect; grow() opens the next part the same way. Both stay
// MAP_NORESERVE, so growth, like allocation, backs nothing until touched.
//
// Thread-safe: no mutable state besides atomic counters.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include "umem/allocator/source/segment.hpp"

namespace umem::trace_replay {

class reserving_source final : public alloc::upstream_source {
 public:
  static constexpr std::size_t granularity = std::size_t{2} << 20;

  // Throws umem::error: invalid_argument for 0 bytes; out_of_memory when mmap fails.
  alloc::segment allocate(std::size_t bytes, const alloc::node_binding& where,
                          coherence kind) override;
  alloc::segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                   const alloc::node_binding& where, coherence kind) override;
  bool grow(alloc::segment& s, std::size_t extra_bytes) override;
  bool decommit(const alloc::segment& s, void* p, std::size_t bytes) override;
  void deallocate(const alloc::segment& s) noexcept override;
  std::string describe() const override;

  // Bytes of the segments handed out (their sizes, grown ones included).
  std::size_t outstanding_bytes() const { return outstanding_.load(); }

 private:
  std::atomic<std::size_t> outstanding_{0};
};

}  // namespace umem::trace_replay
