// Adaptor: memory from an upstream source, made GPU-accessible by a gpu_mapper before it is
// handed out and released from the GPU before it goes back.
//
// Note [Pinned memory does not grow]
// Where the mapper pins memory (cuMemHostRegister, hsa_amd_memory_lock_to_pool: pageable() is
// false) segments never grow: a grown range would be a second registration, and a block of the
// pool spanning two registrations is not one allocation to the driver, whose copies then fail
// (a GPT-2 moved to an H200 failed with "CUDA error: invalid argument" in its first copy).
// allocate_growable() is plain allocate() there and grow() answers false, so the pool takes new
// segments instead (Note [Growable segments] in segment.hpp).
//
// Note [Mapped pieces]
// With a pageable mapping (SVM attributes, or nothing to do with pageable memory access) a grown
// segment (Note [Growable segments]) is mapped piece by piece: the first part at allocation, then
// each grown range as its own segment {base + old size, growth} with the segment's binding and
// kind; the GPU sees one contiguous range. The adaptor records the pieces of every growable
// segment and, at deallocate, unmaps each exactly once before the upstream releases the whole
// reservation. If mapping a grown piece fails, the growth is forgotten (the segment keeps its
// old size) and the exception propagates; the upstream's next grow() commits over it.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/allocator/source/segment.hpp"
#include "umem/allocator/fork_safety.hpp"

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
  void recommit(const segment& s, void* p, std::size_t bytes) override;
  // Unmaps every piece of `s`, then returns it upstream.
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;

 private:
  segment map_or_release(segment s);

  upstream_source& upstream_;
  gpu_mapper& mapper_;
  std::mutex mutex_;  // guards pieces_
  std::shared_ptr<void> fork_ = lock_around_fork(mutex_, fork_rank::source);  // Note [Fork]
  // Sizes of the mapped pieces of each growable segment, by base, in address order.
  std::map<void*, std::vector<std::size_t>> pieces_;
};

}  // namespace umem::alloc
