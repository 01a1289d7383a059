// Adaptor: memory from an upstream source, made GPU-accessible by a gpu_mapper before it is
// handed out and released from the GPU before it goes back.
//
// Note [Mapped pieces]
// A grown segment (segment.hpp, Note [Growable segments]) is mapped piece by piece: the first
// part at allocation, then each grown range as its own segment {base + old size, growth} with
// the segment's binding and kind. Mappers register by base address (cuMemHostRegister,
// hsa_amd_memory_lock_to_pool are undone by the base alone), so unmapping the grown segment as
// one range would leave every piece but the first registered. The adaptor therefore records the
// pieces of every growable segment and, at deallocate, unmaps each exactly once before the
// upstream releases the whole reservation. A block of the pool may span two pieces: both are
// mapped at their host address (the mappers refuse anything else), so the GPU sees one
// contiguous range. If mapping a grown piece fails, the growth is forgotten (the segment keeps
// its old size) and the exception propagates; the upstream's next grow() commits over it.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "umem/allocator/gpu_mapper.hpp"
#include "umem/allocator/segment.hpp"

namespace umem::alloc {

class gpu_visible_source final : public upstream_source {
 public:
  // Both referents must outlive the adaptor.
  gpu_visible_source(upstream_source& upstream, gpu_mapper& mapper)
      : upstream_(upstream), mapper_(mapper) {}

  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override;
  // The upstream's growth, then mapper.map() of the grown piece (Note [Mapped pieces]).
  bool grow(segment& s, std::size_t extra_bytes) override;
  bool decommit(const segment& s, void* p, std::size_t bytes) override;
  // Unmaps every piece of `s`, then returns it upstream.
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;

 private:
  segment map_or_release(segment s);

  upstream_source& upstream_;
  gpu_mapper& mapper_;
  std::mutex mutex_;  // guards pieces_
  // Sizes of the mapped pieces of each growable segment, by base, in address order.
  std::map<void*, std::vector<std::size_t>> pieces_;
};

}  // namespace umem::alloc
