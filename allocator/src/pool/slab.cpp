#include "umem/allocator/detail/pool/slab.hpp"

#include <cstring>

namespace umem::alloc {

void slab::reset(std::uintptr_t at, std::uint32_t size, std::uint32_t cls) {
  base = at;
  object_size = size;
  objects = static_cast<std::uint32_t>(bytes / size);
  size_class = cls;
  const std::uint32_t step = size >> granule_shift;
  // Highest address at the bottom: the first objects handed out are the lowest.
  for (std::uint32_t i = 0; i < objects; ++i)
    free_objects[i] = static_cast<std::uint8_t>((objects - 1 - i) * step);
  free_count = objects;
  for (auto& r : requested) r.store(0, std::memory_order_relaxed);
  remote.store(0, std::memory_order_relaxed);
  next_partial = nullptr;
  in_partial = false;
  next_queued = nullptr;
  queued.store(false, std::memory_order_relaxed);
}

void slab::push_remote(std::uintptr_t address) {
  std::uintptr_t head = remote.load(std::memory_order_relaxed);
  do {
    std::memcpy(reinterpret_cast<void*>(address), &head, sizeof head);
  } while (!remote.compare_exchange_weak(head, address, std::memory_order_acq_rel,
                                         std::memory_order_relaxed));
}

std::uint32_t slab::collect_remote() {
  std::uintptr_t at = remote.exchange(0, std::memory_order_acq_rel);
  std::uint32_t n = 0;
  while (at != 0) {
    free_objects[free_count++] = static_cast<std::uint8_t>((at - base) >> granule_shift);
    std::memcpy(&at, reinterpret_cast<const void*>(at), sizeof at);
    ++n;
  }
  return n;
}

}  // namespace umem::alloc
