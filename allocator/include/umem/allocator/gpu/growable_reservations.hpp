// The bookkeeping of device segments that grow in place through a virtual memory API
// (cuda_device_source: Note [Growable device segments]; rocr_device_source: Note [Growable ROCr
// device segments]): per reservation its size, how much of it is mapped and the handle of each
// mapped range. The vendor calls stay with the sources: `map(base, offset, size)` makes one range
// and returns its handle, or throws having undone what it did.
//
// Thread safety: one mutex; grow() holds it while it maps, so growths are serialized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "umem/allocator/source/segment.hpp"

namespace umem::alloc {

template <class Handle>
class growable_reservations {
 public:
  struct mapped_range {
    std::size_t offset = 0;  // from the reservation's base
    std::size_t size = 0;
    Handle handle{};
  };
  struct reservation {
    std::size_t reserved = 0;
    std::size_t mapped = 0;  // the ranges cover [0, mapped), in order
    std::vector<mapped_range> ranges;
  };

  // Records the reservation of `reserved` bytes at `base` with its first `size` bytes mapped by
  // `map`. When mapping or recording throws, what there is of the reservation goes to
  // `release(base, reservation)` and the error is rethrown.
  template <class Map, class Release>
  void add(std::uintptr_t base, std::size_t reserved, std::size_t size, Map&& map,
           Release&& release) {
    reservation rec{reserved, 0, {}};
    try {
      rec.ranges.reserve(1);
      rec.ranges.push_back({0, size, map(base, std::size_t{0}, size)});
      rec.mapped = size;
      const std::lock_guard lock(mutex_);
      reservations_.emplace(base, rec);  // a copy: `rec` stays whole for the cleanup below
    } catch (...) {
      release(base, rec);
      throw;
    }
  }

  // upstream_source::grow for `s`: maps `extra_bytes` rounded up to `chunk` after what `s` has;
  // false when `s` is not a reservation recorded here or it has no room for that. Throws what
  // `map` throws, leaving `s` and the reservation unchanged.
  template <class Map>
  bool grow(segment& s, std::size_t extra_bytes, std::size_t chunk, Map&& map) {
    const std::lock_guard lock(mutex_);
    const auto it = reservations_.find(key_of(s));
    if (it == reservations_.end()) return false;
    reservation& rec = it->second;
    if (s.size > rec.reserved || extra_bytes > rec.reserved - s.size) return false;
    // s.size and rec.reserved are whole chunks, so the rounded growth fits too.
    const std::size_t target = s.size + (extra_bytes + chunk - 1) / chunk * chunk;
    if (target > rec.mapped) {
      // Below rec.mapped lies a growth `s` does not know of yet (segment.hpp: grow() tolerates
      // it); only what lies beyond is mapped now.
      rec.ranges.reserve(rec.ranges.size() + 1);  // so that keeping the new range cannot fail
      rec.ranges.push_back({rec.mapped, target - rec.mapped,
                            map(it->first, rec.mapped, target - rec.mapped)});
      rec.mapped = target;
    }
    s.size = target;
    return true;
  }

  // The reservation of `s`, no longer recorded; nullopt for a segment that is not one.
  std::optional<reservation> take(const segment& s) {
    const std::lock_guard lock(mutex_);
    if (auto node = reservations_.extract(key_of(s))) return std::move(node.mapped());
    return std::nullopt;
  }

 private:
  static std::uintptr_t key_of(const segment& s) {
    return reinterpret_cast<std::uintptr_t>(s.base);
  }

  std::mutex mutex_;                                    // guards reservations_
  std::map<std::uintptr_t, reservation> reservations_;  // by base address
};

}  // namespace umem::alloc
