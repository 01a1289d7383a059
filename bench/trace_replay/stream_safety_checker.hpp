// Checks, independently of the allocator, that no range freed on one stream is handed to another
// stream before the freeing stream's work is known complete (an `e` event, trace.hpp).
//
// It keeps the ranges freed on each stream since that stream's last `e`. An allocation on stream
// t overlapping such a range of a stream s != t is a violation; on s itself it is safe (stream
// order) and the range is forgotten, as it is live again. `e` on s forgets s's ranges.
//
// Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace umem::trace_replay {

class stream_safety_checker {
 public:
  void on_alloc(const void* p, std::size_t size, std::uint32_t stream);
  void on_free(const void* p, std::size_t size, std::uint32_t stream);
  void on_sync(std::uint32_t stream);
  void on_sync_all() { unsafe_.clear(); }

  std::size_t violations() const { return violations_; }

 private:
  struct freed_range {
    std::uintptr_t end;
    std::uint32_t stream;
  };
  std::map<std::uintptr_t, freed_range> unsafe_;  // by start; ranges never overlap
  std::size_t violations_ = 0;
};

}  // namespace umem::trace_replay
