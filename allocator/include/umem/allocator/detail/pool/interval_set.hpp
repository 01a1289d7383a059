// A set of address ranges [begin, end): the caching pool's record of which granules of a segment
// were given back (Note [Decommitted pages] in caching_pool.hpp). Ranges are disjoint and never
// adjacent (inserting merges neighbours), so each gap between two ranges is real and the pool asks
// the upstream for as few, as large pieces as possible.
//
// Contract: not thread-safe (the owning caching_pool locks around it); addresses are numbers and
// the memory is never touched, so it is tested with made-up ones.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <utility>
#include <vector>

namespace umem::alloc {

class interval_set {
 public:
  using address = std::uintptr_t;
  struct range {
    address begin = 0, end = 0;
    friend bool operator==(const range&, const range&) = default;
  };

  bool empty() const { return ranges_.empty(); }

  // How many bytes of [begin, end) the set covers.
  std::size_t covered(address begin, address end) const {
    std::size_t bytes = 0;
    for (auto it = first_reaching(ranges_, begin); it != ranges_.end() && it->first < end; ++it)
      bytes += std::min(end, it->second) - std::max(begin, it->first);
    return bytes;
  }

  // Calls f(a, e) for each maximal piece [a, e) of [begin, end) the set does not cover, in
  // address order.
  template <class F>
  void for_each_gap(address begin, address end, F&& f) const {
    address at = begin;
    for (auto it = first_reaching(ranges_, begin); at < end; ++it) {
      const address stop = it != ranges_.end() ? std::min(end, it->first) : end;
      if (stop > at) f(at, stop);
      if (it == ranges_.end()) break;
      at = std::max(at, it->second);
    }
  }

  // Adds [begin, end), which must not overlap the set (the pool only adds gaps it found), merging
  // it with a range that ends at `begin` or starts at `end`.
  void insert(address begin, address end) {
    if (auto next = ranges_.find(end); next != ranges_.end()) {
      end = next->second;
      ranges_.erase(next);
    }
    if (auto it = ranges_.lower_bound(begin); it != ranges_.begin() && std::prev(it)->second == begin)
      std::prev(it)->second = end;
    else
      ranges_.emplace(begin, end);
  }

  // Removes the covered part of [begin, end) piece by piece, calling f(a, e) for each piece
  // before removing it: when f throws, that piece and those after it stay in the set, so the set
  // always says what was not taken back.
  template <class F>
  void take(address begin, address end, F&& f) {
    auto it = first_reaching(ranges_, begin);
    while (it != ranges_.end() && it->first < end) {
      const auto [r0, r1] = *it;
      const address a = std::max(begin, r0);
      const address e = std::min(end, r1);
      f(a, e);
      it = ranges_.erase(it);
      if (r0 < a) ranges_.emplace(r0, a);
      if (e < r1) it = ranges_.emplace(e, r1).first;  // starts at `end`: the loop stops there
    }
  }

  std::vector<range> ranges() const {
    std::vector<range> out;
    for (const auto& [b, e] : ranges_) out.push_back({b, e});
    return out;
  }

 private:
  // The first range of `ranges` that ends after `at` (the one containing it, or the next one).
  template <class Map>
  static auto first_reaching(Map& ranges, address at) -> decltype(ranges.begin()) {
    auto it = ranges.upper_bound(at);
    if (it != ranges.begin() && std::prev(it)->second > at) --it;
    return it;
  }

  std::map<address, address> ranges_;  // begin -> end
};

}  // namespace umem::alloc
