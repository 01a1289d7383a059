// Statistics of a caching pool, declared once (the enums and their names below) and exported as a
// flat map and JSON with PyTorch's memory_stats key pattern "<metric>.<pool>.<field>", plus the
// segment/block snapshot (like torch.cuda.memory_snapshot).
//
// Note [Merged peaks]
// The allocator has one pool per (NUMA binding, coherence). Summing per-pool currents gives the
// total current, but summing per-pool peaks does not give the total peak: pools peak at different
// times (pool A peaks at 4 MiB and frees it, then pool B peaks at 4 MiB: the total never exceeded
// 4 MiB, the sum of peaks says 8). So each pool keeps its own peaks, and the total's peaks are
// kept by a global_peak_tracker that every pool of the allocator updates with each change of a
// current value; merge() takes peaks from it and sums everything else.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "umem/allocator/placement.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc {

// Gauges with current/peak/allocated/freed. Key names follow PyTorch where the meaning is the same.
//  allocated_bytes: bytes of blocks handed out (rounded block sizes)
//  reserved_bytes:  bytes of segments obtained from the upstream
//  requested_bytes: bytes the callers asked for (before rounding)
//  allocation:      number of blocks handed out
//  segment:         number of segments obtained from the upstream
enum class metric : std::size_t {
  allocated_bytes, reserved_bytes, requested_bytes, allocation, segment };
inline constexpr std::size_t metric_count = 5;

// Which blocks a gauge covers: all of them, or those of the small (<= small_max) or large
// size class, as PyTorch's "all", "small_pool", "large_pool".
enum class size_class : std::size_t { all, small_pool, large_pool };
inline constexpr std::size_t size_class_count = 3;

// Event counters.
//  num_alloc_retries: allocations that trimmed the cache and retried after the upstream ran out
//  num_ooms:          allocations that failed with out_of_memory (upstream or limit_bytes)
//  upstream_allocs / upstream_frees: segments requested from / returned to the upstream; a
//                   growth of an expandable segment counts as one upstream_allocs (an upstream
//                   call that obtains memory, like the CCA's cuMemMap of a growth)
//  cache_hits:        allocations served without an upstream call
//  spills:            allocations the allocator placed on another node (set by the allocator)
enum class counter : std::size_t {
  num_alloc_retries, num_ooms, upstream_allocs, upstream_frees, cache_hits, spills };
inline constexpr std::size_t counter_count = 6;

const char* to_string(metric);
const char* to_string(size_class);
const char* to_string(counter);

struct stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;       // highest `current` since creation or the last reset_peak()
  std::int64_t allocated = 0;  // sum of all increases
  std::int64_t freed = 0;      // sum of all decreases
  // Inline: the pool calls these on every allocate and free.
  void increase(std::int64_t n) {
    current += n;
    allocated += n;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t n) {
    current -= n;
    freed += n;
  }
  bool operator==(const stat&) const = default;
};

// Plain data; a caching_pool hands out copies taken under its lock.
struct pool_stats {
  std::array<std::array<stat, size_class_count>, metric_count> gauges{};
  std::array<std::int64_t, counter_count> counters{};

  stat& operator()(metric m, size_class c) {
    return gauges[static_cast<std::size_t>(m)][static_cast<std::size_t>(c)];
  }
  const stat& operator()(metric m, size_class c) const {
    return gauges[static_cast<std::size_t>(m)][static_cast<std::size_t>(c)];
  }
  std::int64_t& operator[](counter c) { return counters[static_cast<std::size_t>(c)]; }
  std::int64_t operator[](counter c) const { return counters[static_cast<std::size_t>(c)]; }

  // peak = current for every gauge.
  void reset_peak();
  bool operator==(const pool_stats&) const = default;
};

// Peaks of a sum of pools (Note [Merged peaks]). An allocator with a single pool needs no tracker
// (that pool's peaks are the total's), so it attaches the first pool only when a second appears
// and spares the one-pool hot path these atomics. Thread-safe and lock-free: pools call add()
// under their own locks, so updates from different pools race only on these atomics. A reader
// sees each value at some instant; values of different gauges are not one consistent instant.
class global_peak_tracker {
 public:
  void add(metric m, size_class c, std::int64_t delta) noexcept;
  std::int64_t current(metric m, size_class c) const noexcept;
  std::int64_t peak(metric m, size_class c) const noexcept;
  void reset_peak() noexcept;
  // A pool that joins after it began counting: adds its current values and raises the peaks to
  // its peaks. Exact when the tracker has seen no other pool yet, or when the pool is empty.
  void absorb(const pool_stats& s) noexcept;

 private:
  struct cell {
    std::atomic<std::int64_t> current{0};
    std::atomic<std::int64_t> peak{0};
  };
  cell& at(metric m, size_class c) noexcept;
  const cell& at(metric m, size_class c) const noexcept;
  std::array<std::array<cell, size_class_count>, metric_count> cells_;
};

// The total over `pools`: currents, allocated, freed and counters summed; peaks from `peaks`,
// which every one of these pools must have updated since creation (see caching_pool's constructor).
pool_stats merge(std::span<const pool_stats> pools, const global_peak_tracker& peaks);

// Flat map with PyTorch's key pattern. For pool_name "all" the keys are exactly PyTorch's:
//   "allocated_bytes.all.current", "allocated_bytes.small_pool.peak", ..., "num_alloc_retries".
// For another name (e.g. "node0.fine") the pool part is that name, and the size classes are
// "<name>.small_pool" / "<name>.large_pool"; counters become "<counter>.<name>":
//   "allocated_bytes.node0.fine.current", "segment.node0.fine.large_pool.freed",
//   "num_ooms.node0.fine".
// The metric is always the first dot-separated component and the field always the last.
std::map<std::string, std::int64_t> to_flat_map(const pool_stats& s,
                                                const std::string& pool_name = "all");

// The flat map as one JSON object (keys sorted).
std::string to_json(const pool_stats& s, const std::string& pool_name = "all");

// --- Snapshot: the segments of a pool and the blocks in them, in address order. ---

struct block_snapshot {
  std::size_t offset = 0;     // from the segment's base
  std::size_t size = 0;
  std::size_t requested = 0;  // 0 for free blocks
  bool allocated = false;
  bool thread_cached = false;  // freed by its caller, kept in a thread's cache for reuse
  bool operator==(const block_snapshot&) const = default;
};

struct segment_snapshot {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  node_binding binding;
  coherence kind = coherence::fine;
  bool huge_pages = false;
  size_class pool = size_class::large_pool;  // small_pool or large_pool
  std::vector<block_snapshot> blocks;        // cover [0, size) without gaps
};

struct pool_snapshot {
  std::vector<segment_snapshot> segments;  // ascending base address
};

// {"segments":[{"address":"0x...","size":..,"binding":{"mode":"bind","nodes":[0]},
//   "coherence":"fine","huge_pages":false,"pool":"small_pool",
//   "blocks":[{"offset":0,"size":..,"requested":..,"state":"allocated"|"free"|"thread_cached"}]}]}
std::string to_json(const pool_snapshot& s);

}  // namespace umem::alloc
