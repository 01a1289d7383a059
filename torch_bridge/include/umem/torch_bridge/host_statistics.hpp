// PyTorch's statistics of the torch bridge's CPU tensors (allocated, requested and allocation
// counts by pool class, their peaks, OOMs and retries), kept so that threads allocating and
// freeing at once write nothing they share.
//
// Note [Host statistics]
// Counters every allocation and free update under a shared lock, or as shared atomics, move their
// cache lines between cores on each call: with two threads allocating CPU tensors that cost more
// than the allocation itself (bench/torch_alloc/cpu_alloc_free.py). So each thread counts in a
// record of its own: what it allocated and what it freed, only ever adding (plain stores to its
// own cache lines), and a read adds the records up. A free counts in the freeing thread's record,
// so a record's difference may be negative; the sum is the current value.
// Peaks need a running total. Each record pushes its balance to shared totals when it has moved
// more than flush_bytes or flush_count since its last push, not counting the block just allocated
// if it is at most carried_block_limit (and when its thread ends), so the shared totals lag by at
// most that per thread. A peak must be raised when the shared total plus the allocating thread's
// lag is higher. The shared totals change only when a record pushes, and the peaks fall only when
// they are reset; both move a shared epoch. So each record keeps the room each peak left above the
// shared totals when it last looked, and an allocation compares its own lag with that room and
// loads nothing shared but the epoch; only when the lag is higher, or the epoch moved, does it read
// the totals, raise the peaks (a compare-and-swap) and measure the room anew, which steady
// allocate-free loops do once per push. With one thread allocating, peaks are exact; with
// several, a peak may miss the other threads' unpushed balances (at most flush_bytes and one
// block of at most carried_block_limit each). Without that block's allowance, a thread
// allocating and freeing one block above flush_bytes at a time would push on every call, and two
// such threads spent most of their time passing the shared totals' cache line between them.
// Records of threads that ended are reused by new threads, keeping their sums.
// Thread-safe. The first allocation of a thread takes a mutex (and may allocate its record);
// reads and resets take it too.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "umem/allocator/pool_stats.hpp"

namespace umem::torch_bridge {

class host_statistics {
 public:
  using by_class = std::array<alloc::stat, alloc::size_class_count>;
  struct snapshot {
    by_class allocated_bytes, requested_bytes, allocation;
    std::int64_t num_ooms = 0;
    std::int64_t num_alloc_retries = 0;
  };
  // Blocks of at most this many bytes count in small_pool, larger ones in large_pool.
  explicit host_statistics(std::size_t small_limit);
  ~host_statistics();
  host_statistics(const host_statistics&) = delete;
  host_statistics& operator=(const host_statistics&) = delete;

  // A block PyTorch sees as `reported` bytes, `requested` asked for. Throws std::bad_alloc only on
  // a thread's first call (its record).
  void allocated(std::size_t reported, std::size_t requested);
  void freed(std::size_t reported, std::size_t requested);
  void out_of_memory() noexcept;
  void retried(std::int64_t n) noexcept;

  snapshot read() const;
  void reset_peaks();        // to the current values
  void reset_accumulated();  // allocated and freed sums, OOMs and retries to 0

  struct shared;  // the records and totals, kept alive by the threads that count in them

 private:
  // The side (0: small_pool, 1: large_pool) a block counts in, and what it adds to each gauge:
  // bytes, requested bytes, one allocation.
  struct change {
    std::size_t side;
    std::array<std::int64_t, 3> amounts;
  };
  change change_of(std::size_t reported, std::size_t requested) const;

  std::size_t small_limit_;
  std::shared_ptr<shared> shared_;
};

}  // namespace umem::torch_bridge
