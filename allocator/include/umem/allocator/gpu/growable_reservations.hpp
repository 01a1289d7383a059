// The bookkeeping of device segments that grow in place through a virtual memory API
// (cuda_device_source: Note [Growable device segments]; rocr_device_source: Note [Growable ROCr
// device segments]): per reservation its size, how far it has been mapped and the mapped ranges
// with their handles, by offset. A range may be given back on its own (decommit) and mapped again
// (recommit) while the rest stays, so a source that maps one handle per chunk lets the caching
// pool give back any free chunk (Note [Decommitted pages] in segment.hpp). The vendor calls stay
// with the sources: `map(base, offset, size)` makes the ranges that cover [offset, offset + size)
// and returns them in order, or throws having undone what it did; `unmap(base, range)` undoes one
// range and cannot fail.
//
// Thread safety: one mutex; grow(), decommit() and recommit() hold it while they call the
// vendor, so they are serialized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "umem/allocator/source/segment.hpp"
#include "umem/allocator/fork_safety.hpp"

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
    std::size_t extent = 0;  // [0, extent) has been mapped; ranges holds what is mapped now
    std::map<std::size_t, mapped_range> ranges;  // by offset; given-back ranges are holes
    std::size_t mapped_bytes() const {
      std::size_t n = 0;
      for (const auto& [offset, r] : ranges) n += r.size;
      return n;
    }
  };

  // Records the reservation of `reserved` bytes at `base` with its first `size` bytes mapped by
  // `map`. When mapping or recording throws, what there is of the reservation goes to
  // `release(base, reservation)` and the error is rethrown.
  template <class Map, class Release>
  void add(std::uintptr_t base, std::size_t reserved, std::size_t size, Map&& map,
           Release&& release) {
    reservation rec{reserved, 0, {}};
    try {
      keep(rec, map(base, std::size_t{0}, size));
      rec.extent = size;
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
    if (target > rec.extent) {
      // Below rec.extent lies a growth `s` does not know of yet (segment.hpp: grow() tolerates
      // it); only what lies beyond is mapped now.
      keep(rec, map(it->first, rec.extent, target - rec.extent));
      rec.extent = target;
    }
    s.size = target;
    return true;
  }

  // upstream_source::decommit of [offset, offset + bytes) of `s`: when that span is exactly whole
  // mapped ranges, calls unmap(base, range) for each, forgets them and answers true; else
  // (not a reservation here, a range cut, a hole inside) false, changing nothing.
  template <class Unmap>
  bool decommit(const segment& s, std::size_t offset, std::size_t bytes, Unmap&& unmap) {
    const std::lock_guard lock(mutex_);
    const auto it = reservations_.find(key_of(s));
    if (it == reservations_.end() || bytes == 0) return false;
    auto& ranges = it->second.ranges;
    const auto first = ranges.find(offset);
    auto last = first;
    for (std::size_t at = offset; at < offset + bytes; ++last) {
      if (last == ranges.end() || last->first != at) return false;
      at += last->second.size;
      if (at > offset + bytes) return false;
    }
    for (auto r = first; r != last; ++r) unmap(it->first, r->second);
    ranges.erase(first, last);
    return true;
  }

  // upstream_source::recommit: maps each hole inside [offset, offset + bytes) of `s` with `map`.
  // Throws what `map` throws; the holes mapped before the failure stay mapped and recorded.
  template <class Map>
  void recommit(const segment& s, std::size_t offset, std::size_t bytes, Map&& map) {
    const std::lock_guard lock(mutex_);
    const auto it = reservations_.find(key_of(s));
    if (it == reservations_.end()) return;
    reservation& rec = it->second;
    const std::size_t end = offset + bytes;
    std::size_t at = offset;
    auto r = rec.ranges.upper_bound(offset);
    if (r != rec.ranges.begin() && std::prev(r)->second.offset + std::prev(r)->second.size > at)
      at = std::prev(r)->second.offset + std::prev(r)->second.size;
    while (at < end) {
      const std::size_t stop = r == rec.ranges.end() ? end : std::min(end, r->first);
      if (stop > at) keep(rec, map(it->first, at, stop - at));
      if (r == rec.ranges.end()) break;
      at = r->second.offset + r->second.size;
      r = rec.ranges.upper_bound(r->first);
    }
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
  static void keep(reservation& rec, std::vector<mapped_range>&& made) {
    for (mapped_range& m : made) rec.ranges.emplace(m.offset, m);
  }

  std::mutex mutex_;                                    // guards reservations_
  std::shared_ptr<void> fork_ = lock_around_fork(mutex_, fork_rank::source);  // Note [Fork]
  std::map<std::uintptr_t, reservation> reservations_;  // by base address
};

}  // namespace umem::alloc
