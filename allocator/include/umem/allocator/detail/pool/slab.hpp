// A slab: 64 KiB of a pool carved into objects of one small size class, for the thread caches'
// small-size path (Note [Slabs] in thread_cache.hpp).
//
// A slab's memory is a block of the pool's slab segments (Note [Slab segments] in
// caching_pool.hpp), aligned to its size, so the address of any object names its slab
// (granule_of). Its record lives outside that memory: the memory is the caller's and may be
// device-visible, and a record beside the objects would be overwritten by a buffer overrun.
// Per object it keeps the request (exact requested bytes), 0 while the object is free: a request
// is at least 1 byte (caching_pool::size_request), so the one word is also the double-free check.
// Who touches what:
// - The owning thread cache (owner != nullptr) hands objects out and takes them back through
//   `free_objects` and `requested`, inside its owner section (Note [Thread cache]).
// - Any other thread frees an object through the pool's lock: it moves the request to 0 with a
//   compare-and-swap and pushes the object on `remote`, which the owner empties
//   into `free_objects` when it runs out (collect_remote). A stealer (trim, exit) empties it
//   too, holding the pool's lock, while the owner is outside its section.
// - Without an owner (its thread exited) the pool does all of it under its lock.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace umem::alloc {

class thread_cache;
struct block;

// Cache-line aligned: its owner writes free_count, free_objects and requested on every
// operation, and records lie side by side (the pool keeps them in a deque), owned by different
// threads.
struct alignas(64) slab {
  static constexpr std::size_t bytes = std::size_t{64} << 10;
  static constexpr unsigned granule_shift = 8;  // 256-byte granules: the pool's alignment
  static constexpr std::size_t granules = bytes >> granule_shift;
  static constexpr unsigned shift = 16;  // log2(bytes)

  static std::uintptr_t granule_of(std::uintptr_t address) { return address >> shift; }

  std::uintptr_t base = 0;       // aligned to `bytes`
  block* chunk = nullptr;         // the pool's block of the slab's memory
  std::uint32_t object_size = 0;  // a multiple of 256
  std::uint32_t objects = 0;      // bytes / object_size
  std::uint32_t size_class = 0;   // the thread cache's slab class
  // Null: its thread exited, or the slab is the pool's again. Written under the pool's lock.
  std::atomic<thread_cache*> owner{nullptr};
  // The owner's lists: the slabs of a class with free objects besides the active one, and the
  // slabs other threads freed objects into (pushed under the pool's lock, taken by the owner).
  slab* next_partial = nullptr;
  bool in_partial = false;
  slab* next_queued = nullptr;
  std::atomic<bool> queued{false};
  // Free objects as granule indices; [0, free_count) is a stack, the owner's.
  std::uint32_t free_count = 0;
  std::array<std::uint8_t, granules> free_objects{};
  // Per granule, the live object's request or 0; only an object's first granule is used.
  std::array<std::atomic<std::uint32_t>, granules> requested{};
  // Objects freed by other threads, not yet in free_objects: a stack linked through the freed
  // objects' first 8 bytes (address 0: empty).
  std::atomic<std::uintptr_t> remote{0};

  std::uintptr_t address_of(std::uint32_t granule) const {
    return base + (std::uintptr_t{granule} << granule_shift);
  }
  // The granule index of the object starting at `address`, or -1 when no object starts there.
  int object_at(std::uintptr_t address) const {
    const std::uintptr_t offset = address - base;
    if (offset >= bytes || offset % object_size != 0) return -1;
    return static_cast<int>(offset >> granule_shift);
  }
  // Fills free_objects with every object (a new slab), lowest address on top.
  void reset(std::uintptr_t at, std::uint32_t size, std::uint32_t cls);
  // Pushes an object freed by a thread other than the owner (its request already 0).
  void push_remote(std::uintptr_t address);
  // Moves the objects of `remote` into free_objects; how many. The owner's, or the pool's for a
  // slab without one.
  std::uint32_t collect_remote();
};

}  // namespace umem::alloc
