// A per-thread cache of freed blocks in front of one caching_pool: the pool's fast path.
//
// Note [Thread cache]
// The pool's own path takes its mutex, a best-fit search, a split, a hash insert and the
// statistics for every call (cost: docs/results.md). Most programs free a block on the thread that
// allocated it and soon allocate the same size again, so each thread keeps the blocks it freed in
// bins by size class and hands them out again without a lock. What stays correct:
// - Ownership and double free: every block carries a ticket (generation << 2 | state, Note
//   [Block tickets] in free_list.hpp). A thread remembers the blocks it handed out, with their
//   ticket, in a small table; its free checks that ticket and sets it cached. A
//   pointer the table does not know (freed on another thread, evicted from the table, foreign or
//   freed twice) takes the pool's locked path, which reads the ticket under the pool's lock: a
//   cached block there is a double free. A table entry whose block was since freed elsewhere
//   (and maybe reused) no longer matches the ticket, so that free takes the locked path too.
//   Not detected: two frees of one block at the same instant on two threads (a data race in the
//   caller's program); a check-and-set there would cost a locked instruction on every free.
// - Other threads' access: trim(), an out-of-memory retry, reset_peak_stats() and the thread's
//   exit take blocks out of bins (steal()) while the owner may be running. The owner marks each
//   bin operation busy and checks that no steal is pending; the stealer marks the steal pending
//   and waits until the owner is not busy. Each side stores its flag and then loads the other's,
//   ordered by an asymmetric fence (asymmetric_fence.hpp): a compiler barrier on the owner's
//   side, a membarrier() system call on the stealer's. So exactly one side touches the bins at a
//   time, without a locked instruction on the fast path. Where membarrier() is not available
//   thread caches are off. Counters are single-writer atomics (the owner's, and the stealers',
//   which hold the registry lock): stats() reads them without stopping the owner.
// - Memory: a thread holds at most `capacity_bytes` per pool; blocks above the largest class
//   (64 MiB) are never cached. Cached blocks stay reserved by the pool and count as cached, not
//   allocated (pool_stats.hpp, Note [Statistics with thread caches]).
// - Big blocks (above 1 MiB, one per bin) help a thread that reuses a few big sizes. In a mix of
//   many big sizes they are rarely hit, and held in bins they keep the pool from merging and
//   reusing them, so it grows and touches fresh pages instead. So a big request the bins cannot
//   serve first gives the thread's big blocks back to the pool (return_big), under the lock the
//   request takes anyway: a thread keeps big blocks only while it keeps hitting them.
// Not thread-safe beyond that: the owner-thread functions are called only by the thread the
// cache belongs to; steal() and the counters' readers hold the registry lock (thread_cache_registry).
//
// Note [Thread cache fast path]
// take() and put() are most of what an allocate() and a deallocate() cost on a hit, so they do
// as little as the guarantees above allow: they are always inlined into the allocator's front
// end (not inlined, GCC called them, and even bump(), out of line); the bins live in the object
// (no pointer to follow); the table entry keeps no request (the block's live_requested has it,
// written by this thread); and the size check of a request is the caller's (allocate_cached).
// Their cost on a hit is a chain of loads, each waiting for the store before it: a bin's top is
// what the last free stored, and a table entry what the last allocation stored. So the chain is
// kept short. A bin keeps its top block apart from the slots below it, with the top's address
// and size beside it (take() reads no count first, and needs the block itself only for its
// ticket); a table entry keeps the block's size and bin (put() needs no load from the block but
// its ticket). Before, take() read the count, then the slot, then the block's size and address
// (docs/log/2026-12-04-before-fast-path.md: what that cost at 64 KiB).
//
// Note [Slabs]
// Requests of at most slab_max (4 KiB) bytes are objects of slabs (slab.hpp), not blocks: a block
// costs a record, a table entry on every allocation and a pool lock on every miss, and at 256
// bytes that was most of an allocate() and deallocate()
// (docs/log/2026-12-06-small-size-slab-estimate.md). A 64 KiB slab holds 16 objects of 4 KiB.
// A thread owns the slabs it took from the pool; per size class one is active (allocations pop
// its stack of free objects) and a table keyed by the 64 KiB granule finds the owned slab of a
// freed pointer. What stays as with blocks:
// - Double frees: each object keeps its request, 0 while free; a free of an object that is not
//   live takes the pool's path, which reports it. Frees on other threads go through the pool's
//   lock to the slab's remote stack, which the owner takes over when its active slab runs out.
// - Statistics: each object is one allocation of the small class, counted by the thread
//   (single-writer counters, one count and one requested sum per class and direction: the
//   bytes follow from the class; the owner's alone, so counted after its section) or by the
//   pool for frees on other threads. The pool counts a slab it hands out as allocated in its own
//   figures (for peaks, as a cached block) and takes that back out of callers' totals (Note
//   [Statistics with thread caches]).
// - trim(), out-of-memory retries and reset_peak_stats() take every slab whose objects are all
//   free (steal()); a thread's exit gives those back and leaves the others to the pool, which
//   frees their objects under its lock and releases each slab when its last object is freed.
// Not bounded by capacity_bytes: a thread keeps the slabs its own peak of small objects needed
// until trim(), an out-of-memory retry, reset_peak_stats() or its exit takes the fully free ones.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "umem/allocator/detail/pool/asymmetric_fence.hpp"
#include "umem/allocator/detail/pool/free_list.hpp"
#include "umem/allocator/detail/pool/slab.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/core/detail/single_writer.hpp"

namespace umem::alloc {

// What one thread did through its cache, per size class (small_pool, large_pool).
struct thread_cache_totals {
  struct per_class {
    std::int64_t alloc_bytes = 0, alloc_count = 0, alloc_requested = 0;
    std::int64_t free_bytes = 0, free_count = 0, free_requested = 0;
    std::int64_t held_bytes = 0, held_count = 0;  // in bins now
  };
  std::array<per_class, 2> classes{};  // [0] small_pool, [1] large_pool
  std::int64_t hits = 0;               // allocations served from the bins
  thread_cache_totals& operator+=(const thread_cache_totals& o);
};

// Cache-line aligned, so its lines are its own: the owner writes busy_ (its last line) on every
// operation, and glibc puts the thread's next allocation right after the cache, which may be an
// object other threads write (the pool's slab records). Unaligned, slab objects took twice their
// time with 2 threads in most processes of a benchmark, stalled at busy_
// (docs/log/2026-12-07-cpu-benchmark-in-one-process.md).
class alignas(64) thread_cache {
 public:
  static constexpr std::size_t slots_per_bin = 8;
  // Bins of blocks above 1 MiB hold one: a thread reusing a big size needs one, and big blocks of
  // many sizes held per thread keep the pool from reusing or merging them (more growth, and first
  // touches of fresh memory, in mixes of large sizes).
  static constexpr std::size_t big_bin_first = 8 + (20 - 11) * 8;  // bin_of(1 MiB + 1)
  static constexpr std::size_t big_bins = 8 + (26 - 11) * 8 - big_bin_first;  // up to 64 MiB
  static constexpr std::uint32_t slots_of(std::size_t bin) {
    return bin >= big_bin_first ? 1 : slots_per_bin;
  }
  static constexpr std::size_t largest_cached = std::size_t{64} << 20;
  // Requests of big blocks (above 1 MiB): a miss returns the big bins (return_big).
  static constexpr bool is_big(std::size_t rounded) { return rounded > (std::size_t{1} << 20); }
  static constexpr std::size_t table_entries = 256;

  // `small_max`: the pool's boundary between its small and large class (for the totals).
  thread_cache(std::size_t capacity_bytes, std::size_t small_max);
  thread_cache(const thread_cache&) = delete;
  thread_cache& operator=(const thread_cache&) = delete;

  // --- Owner thread only; defined below, always inlined: they are the fast path (Note [Thread
  // cache fast path]). ---
  // The address of a cached block of at least `rounded` bytes (same size class), now marked
  // live for `request`, or nullptr. Requires 0 < rounded <= largest_cached (the caller checks
  // the request).
  void* take(std::size_t rounded, std::size_t request);
  // Remembers a block the pool just handed to this thread (its ticket as the pool set it; its
  // live_requested the request). Blocks above largest_cached are never cached, so not remembered.
  void remember(block* b, std::uint64_t ticket);
  // The fast free: true when `p` was this thread's live block and is now in a bin; false when
  // the pool's locked path must handle it (unknown pointer, double free, or no room).
  bool put(const void* p);
  // put() in two steps, for a front end that makes the second a call out of line (Note [Fast
  // front end] in allocator.cpp): a live object of a slab this thread owns (Note [Slabs]), then
  // a live block of this thread's.
  bool put_object(std::uintptr_t address);
  bool put_block(std::uintptr_t address);
  // Moves the blocks of the big bins (above 1 MiB) into `out`, their tickets still cached, for the
  // pool to take back (Note [Thread cache]); how many. None when a steal is pending.
  std::size_t return_big(std::span<block*, big_bins> out);

  // Slabs (Note [Slabs]): requests of at most slab_max bytes.
  static constexpr std::size_t slab_max = 4096;
  static constexpr std::size_t slab_classes = slab_max / 256;
  static constexpr std::size_t slab_class_of(std::size_t rounded) { return (rounded >> 8) - 1; }
  // --- Owner thread only. ---
  // An object for a request of 1 to slab_max bytes from its class's active slab, now live, or
  // nullptr (none active, it is empty, or a steal is pending). Inline, always.
  void* take_object(std::size_t request);
  // The slow path of take_object: makes a slab of the class with free objects active (the active
  // one after taking over its remote frees, else another this thread owns); false when none has
  // a free object or a steal is pending.
  bool refill(std::size_t size_class);
  // Takes `s`, a new slab from the pool (its owner already this cache), as the active slab of its
  // class; false when a steal is pending or there is no memory to list it (the caller gives it
  // back).
  bool adopt(slab* s);
  // --- Any thread holding the pool's lock: `s`, owned by this cache, got its first object freed
  // by another thread since the owner last looked (slab::push_remote). ---
  void queue_remote(slab* s);

  // --- Any thread holding the registry lock. ---
  // A steal in steps: request_steal() on the caches, asymmetric_fence_heavy() once, then steal()
  // waits until the owner is outside its section and moves every cached block to `out` (their
  // tickets still say cached); steal_slabs() may follow; end_steal() lets the owner go on.
  void request_steal() { steal_pending_.store(true, std::memory_order_relaxed); }
  void steal(std::vector<block*>& out);
  void end_steal() { steal_pending_.store(false, std::memory_order_release); }
  // The slabs' part of a steal, between request_steal() and steal(), with the pool's lock held:
  // every owned slab whose objects are all free moves to `released`; with `orphaned` (the
  // owner's exit) every other one moves there.
  void steal_slabs(std::vector<slab*>& released, std::vector<slab*>* orphaned);
  bool owns_slabs() const { return !slabs_.empty(); }
  thread_cache_totals totals() const;

 private:
  // The request is not kept here: the block's live_requested holds it (the owner's own write).
  // Cached blocks are at most largest_cached, so their size fits 32 bits.
  struct entry {
    std::uintptr_t address = 0;  // 0: empty
    block* b = nullptr;
    std::uint64_t ticket = 0;
    std::uint32_t size = 0;  // b->size: the matching ticket says it has not changed
    std::uint32_t bin = 0;   // bin_of(size)
  };
  // A stack of blocks: the top apart, with the owner's copies of its address and size, and the
  // others in `slots` (Note [Thread cache fast path]). A steal empties the whole bin, so a null
  // top tells the owner that the slots below it are gone too, whatever `below` says.
  struct alignas(32) bin {
    std::atomic<block*> top{nullptr};
    std::uintptr_t top_address = 0;
    std::size_t top_size = 0;  // 0: the owner left the bin empty
    std::uint32_t below = 0;   // blocks in slots (owner's view)
    std::uint32_t limit = slots_per_bin - 1;  // slots_of(this bin) - 1: room under the top
    std::array<std::atomic<block*>, slots_per_bin - 1> slots{};
  };
  // The owner's side of the protocol, around every bin operation: `ok` false means a steal is
  // pending and the caller must take the pool's path.
  class owner_section {
   public:
    [[gnu::always_inline]] explicit owner_section(thread_cache& c) : c_(c) {
      c_.busy_.store(true, std::memory_order_relaxed);
      asymmetric_fence_light();
      ok_ = !c_.steal_pending_.load(std::memory_order_acquire);
    }
    [[gnu::always_inline]] ~owner_section() { c_.busy_.store(false, std::memory_order_release); }
    owner_section(const owner_section&) = delete;
    owner_section& operator=(const owner_section&) = delete;
    bool ok() const { return ok_; }

   private:
    thread_cache& c_;
    bool ok_;
  };
  // Single-writer counters, readable by any thread. What the bins hold is derived: every cached
  // free adds a block, every hit and every stolen block takes one.
  struct counters {
    std::atomic<std::int64_t> alloc_bytes{0}, alloc_count{0}, alloc_requested{0};
    std::atomic<std::int64_t> free_bytes{0}, free_count{0}, free_requested{0};
  };
  // Blocks that left the bins other than by a hit: stolen (stealers' writes, under the registry
  // lock) or returned by the owner (return_big, the owner's writes).
  struct stolen_counters {
    std::atomic<std::int64_t> bytes{0}, count{0};
  };

  // Size classes: 256-byte steps up to 2 KiB, then 8 per power of two up to largest_cached.
  static constexpr std::size_t exact_classes = 8;
  static constexpr std::size_t steps_per_power = 8;
  static constexpr std::size_t first_power = 11;  // (2 KiB, 4 KiB] is the first stepped range
  static constexpr std::size_t bin_count = exact_classes + (26 - first_power) * steps_per_power;
  static_assert(big_bin_first + big_bins == bin_count && big_bins <= 64,
                "the big bins are the last ones, one bit each in big_filled_");

  [[gnu::always_inline]] static std::size_t bin_of(std::size_t rounded) {
    if (rounded <= exact_classes * 256) return rounded == 0 ? 0 : (rounded - 1) >> 8;
    const auto power = static_cast<std::size_t>(std::bit_width(rounded - 1)) - 1;  // >= 11
    const std::size_t step = ((rounded - 1) >> (power - 3)) & (steps_per_power - 1);
    return exact_classes + (power - first_power) * steps_per_power + step;
  }
  // Fibonacci hashing of the 256-byte granule: neighbouring blocks land in different slots.
  [[gnu::always_inline]] static std::size_t slot_of(std::uintptr_t address) {
    constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ULL;
    return static_cast<std::size_t>(((address >> 8) * golden) >> 56) % table_entries;
  }
  [[gnu::always_inline]] std::size_t class_of(std::size_t size) const {
    return size <= small_max_ ? 0 : 1;
  }
  // Adds the bytes stealers took since the last call to room_; whether `size` fits now.
  bool reclaim_room(std::size_t size) {
    const std::int64_t stolen = stolen_bytes_.load(std::memory_order_relaxed);
    room_ += stolen - stolen_seen_;
    stolen_seen_ = stolen;
    return static_cast<std::int64_t>(size) <= room_;
  }
  // Single-writer counter update (Note [Single-writer counters] in single_writer.hpp): no locked
  // instruction on the fast path.
  [[gnu::always_inline]] static void bump(std::atomic<std::int64_t>& a, std::int64_t d) {
    umem::detail::single_writer_add(a, d);
  }

  // Per slab class and direction: the bytes are the count times the class's size.
  struct slab_counters {
    std::atomic<std::int64_t> alloc_count{0}, alloc_requested{0};
    std::atomic<std::int64_t> free_count{0}, free_requested{0};
  };
  // The owned slabs by their 64 KiB granule (slab::granule_of), in two arrays indexed alike, so
  // that a lookup is one scaled load and compare: slab_bases_ and slab_of_slot_. A free compares
  // its address with bits 8-15 cleared (object_key) against the base: equal only for the start of
  // a 256-byte granule of that slab. An empty entry holds no_slab, which has those bits set, so
  // no address matches it (null included). Direct-mapped: a slab that loses its entry to another
  // is still owned, and its objects' frees take the pool's path (the remote stack). A stealer
  // clears the entries of the slabs it takes, so the owner reads them inside its section only.
  // Relaxed atomics: those reads cost a plain load.
  static constexpr std::size_t slab_table_entries = 256;
  static constexpr std::uintptr_t no_slab = ~std::uintptr_t{0};
  static constexpr std::uintptr_t object_key(std::uintptr_t address) {
    return address & ~std::uintptr_t{0xff00};
  }
  static std::size_t slab_slot_of(const slab* s) {
    return slab::granule_of(s->base) % slab_table_entries;
  }
  void list_partial(slab* s) {
    s->in_partial = true;
    s->next_partial = partial_[s->size_class];
    partial_[s->size_class] = s;
  }
  // take_object's part inside the owner's section: the address of an object of class `k`, now
  // live for `request`, or 0 (no object starts at 0).
  std::uintptr_t pop_object(std::size_t k, std::uint32_t request);
  // put_object's part inside the owner's section: the freed object's request (0: none freed,
  // `address` is no live object of an owned slab) and its slab's class.
  struct freed_object {
    std::uint32_t request = 0;
    std::uint32_t size_class = 0;
  };
  freed_object push_object(std::uintptr_t address);
  // Moves the slabs other threads freed objects into onto their partial lists.
  void take_queued();

  const std::size_t small_max_;
  // The owner's: the slab each class allocates from, the other owned slabs with free objects,
  // the table that finds an owned slab by address, and every owned slab. A stealer changes them
  // only while the owner is outside its section (Note [Thread cache]).
  std::array<slab*, slab_classes> active_{};
  std::array<slab*, slab_classes> partial_{};
  std::array<std::atomic<std::uintptr_t>, slab_table_entries> slab_bases_;  // no_slab: empty
  std::array<std::atomic<slab*>, slab_table_entries> slab_of_slot_{};
  std::vector<slab*> slabs_;
  std::atomic<slab*> queued_{nullptr};  // slabs with objects freed by other threads
  std::array<slab_counters, slab_classes> slab_counters_{};
  std::array<bin, bin_count> bins_;  // in the object: one dependent load less on the fast path
  std::array<entry, table_entries> table_{};
  std::array<counters, 2> counters_{};
  std::array<stolen_counters, 2> stolen_{};
  std::array<stolen_counters, 2> returned_{};
  // Big bins the owner filled since it last emptied them (bit i: bin big_bin_first + i); a
  // stealer may have emptied them since. Kept on every operation (a compare for other bins):
  // return_big() scanning all 48 big bins was slower (docs/log/2026-12-05-comment-numbers.md).
  std::uint64_t big_filled_ = 0;
  // capacity_bytes - the bytes in bins, except that blocks stealers took since the owner last
  // looked (stolen_bytes_ - stolen_seen_) still count as held: put() adds them back when it runs
  // short, so the fast path reads no stealer's write.
  std::int64_t room_;
  std::int64_t stolen_seen_ = 0;
  std::atomic<std::int64_t> stolen_bytes_{0};  // taken by stealers, ever
  std::atomic<bool> busy_{false};           // the owner is in a bin operation
  std::atomic<bool> steal_pending_{false};  // a stealer wants the bins
};

[[gnu::always_inline]] inline void* thread_cache::take(std::size_t rounded,
                                                        std::size_t request) {
  const std::size_t index = bin_of(rounded);
  bin& bn = bins_[index];
  const std::size_t size = bn.top_size;
  if (size < rounded) return nullptr;  // empty, or a smaller block of the class: left for one
  std::uintptr_t address = 0;
  {
    const owner_section section(*this);
    if (!section.ok()) return nullptr;
    block* b = bn.top.load(std::memory_order_acquire);
    if (b == nullptr) {  // a stealer emptied the bin
      bn.top_size = 0;
      bn.below = 0;
      return nullptr;
    }
    address = bn.top_address;
    if (const std::uint32_t below = bn.below; below != 0) {
      std::atomic<block*>& slot = bn.slots[below - 1];
      block* next = slot.load(std::memory_order_relaxed);  // not stolen: the top was not
      slot.store(nullptr, std::memory_order_relaxed);
      bn.top.store(next, std::memory_order_relaxed);
      bn.top_address = next->address;
      bn.top_size = next->size;
      bn.below = below - 1;
    } else {
      bn.top.store(nullptr, std::memory_order_relaxed);
      bn.top_size = 0;
      if (index >= big_bin_first) big_filled_ &= ~(std::uint64_t{1} << (index - big_bin_first));
    }
    room_ += static_cast<std::int64_t>(size);
    const std::uint64_t t =
        ticket::with_state(b->ticket.load(std::memory_order_relaxed), ticket::live);
    b->live_requested.store(request, std::memory_order_relaxed);
    b->ticket.store(t, std::memory_order_release);
    table_[slot_of(address)] = entry{address, b, t, static_cast<std::uint32_t>(size),
                                     static_cast<std::uint32_t>(index)};
  }
  // The counters are the owner's alone (no stealer writes them): counted after the section.
  counters& k = counters_[class_of(size)];
  bump(k.alloc_bytes, static_cast<std::int64_t>(size));
  umem::detail::single_writer_count(k.alloc_count, k.alloc_requested,
                                    static_cast<std::int64_t>(request));
  // No block starts at 0: the caller's "hit?" test then needs no compare.
  if (address == 0) __builtin_unreachable();
  return reinterpret_cast<void*>(address);
}

inline void thread_cache::remember(block* b, std::uint64_t t) {
  const std::size_t size = b->size;
  if (size > largest_cached) return;
  table_[slot_of(b->address)] = entry{b->address, b, t, static_cast<std::uint32_t>(size),
                                      static_cast<std::uint32_t>(bin_of(size))};
}

[[gnu::always_inline]] inline std::uintptr_t thread_cache::pop_object(std::size_t k,
                                                                       std::uint32_t request) {
  const owner_section section(*this);
  if (!section.ok()) return 0;
  slab* s = active_[k];
  if (s == nullptr) return 0;
  const std::uint32_t n = s->free_count;
  if (n == 0) return 0;
  const std::uint32_t g = s->free_objects[n - 1];
  s->free_count = n - 1;
  s->requested[g].store(request, std::memory_order_relaxed);
  const std::uintptr_t address = s->address_of(g);
  if (address == 0) __builtin_unreachable();  // as take()'s
  return address;
}

[[gnu::always_inline]] inline void* thread_cache::take_object(std::size_t request) {
  const std::size_t k = (request - 1) >> 8;  // slab_class_of(the request rounded up to 256)
  const std::uintptr_t address = pop_object(k, static_cast<std::uint32_t>(request));
  if (address == 0) return nullptr;
  // The counters are the owner's alone (no stealer writes them): counted after the section.
  slab_counters& c = slab_counters_[k];
  umem::detail::single_writer_count(c.alloc_count, c.alloc_requested,
                                    static_cast<std::int64_t>(request));
  return reinterpret_cast<void*>(address);
}

[[gnu::always_inline]] inline thread_cache::freed_object thread_cache::push_object(
    std::uintptr_t address) {
  const std::size_t slot = slab::granule_of(address) % slab_table_entries;
  const owner_section section(*this);
  if (!section.ok()) return {};
  // Inside the section: a stealer takes slabs only while the owner is outside.
  if (slab_bases_[slot].load(std::memory_order_relaxed) != object_key(address)) return {};
  slab* s = slab_of_slot_[slot].load(std::memory_order_relaxed);
  const auto g = static_cast<std::uint32_t>((address >> slab::granule_shift) % slab::granules);
  // Only an object's first granule is ever live: another address is the pool's to report.
  const std::uint32_t request = s->requested[g].load(std::memory_order_relaxed);
  if (request == 0) return {};
  s->requested[g].store(0, std::memory_order_relaxed);
  const std::uint32_t n = s->free_count;
  s->free_objects[n] = static_cast<std::uint8_t>(g);
  s->free_count = n + 1;
  if (n == 0 && s != active_[s->size_class]) list_partial(s);
  return {request, s->size_class};
}

// False when `address` is no object of an owned slab, or not live (the pool's path says what it
// is).
[[gnu::always_inline]] inline bool thread_cache::put_object(std::uintptr_t address) {
  const freed_object freed = push_object(address);
  if (freed.request == 0) return false;
  slab_counters& c = slab_counters_[freed.size_class];  // the owner's: counted after the section
  umem::detail::single_writer_count(c.free_count, c.free_requested,
                                    static_cast<std::int64_t>(freed.request));
  return true;
}

[[gnu::always_inline]] inline bool thread_cache::put(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  return put_object(address) || put_block(address);
}

[[gnu::always_inline]] inline bool thread_cache::put_block(std::uintptr_t address) {
  entry& e = table_[slot_of(address)];
  if (e.address != address) return false;
  const entry mine = e;
  e.address = 0;  // whatever happens next, this thread no longer holds the block
  // A load and a store, not a compare-and-swap: only a free racing with this one on another
  // thread could change the ticket in between, and two simultaneous frees of one block are a data
  // race in the caller's program (Note [Thread cache]).
  if (mine.b->ticket.load(std::memory_order_acquire) != mine.ticket)
    return false;  // freed elsewhere since (and maybe reused): the locked path says what it is
  // The ticket matched, so the block is still this thread's: its size is the entry's, and it is
  // at most largest_cached (remember() and take() keep no others).
  const std::size_t size = mine.size;
  bin& bn = bins_[mine.bin];
  const std::uint32_t below = bn.below;
  if ((bn.top_size != 0 && below == bn.limit) ||
      (static_cast<std::int64_t>(size) > room_ && !reclaim_room(size)))
    return false;
  std::size_t request = 0;
  {
    const owner_section section(*this);
    if (!section.ok()) return false;
    if (block* old = bn.top.load(std::memory_order_relaxed)) {
      bn.slots[below].store(old, std::memory_order_release);
      bn.below = below + 1;
    } else {
      bn.below = 0;  // empty, or emptied by a stealer
    }
    // Read while the block is still this thread's: once it is in a bin, a stealer may take it.
    request = mine.b->live_requested.load(std::memory_order_relaxed);
    mine.b->ticket.store(ticket::with_state(mine.ticket, ticket::cached),
                         std::memory_order_release);
    bn.top.store(mine.b, std::memory_order_release);
    bn.top_address = address;
    bn.top_size = size;
    if (mine.bin >= big_bin_first) big_filled_ |= std::uint64_t{1} << (mine.bin - big_bin_first);
    room_ -= static_cast<std::int64_t>(size);
  }
  counters& k = counters_[class_of(size)];  // the owner's: counted after the section
  bump(k.free_bytes, static_cast<std::int64_t>(size));
  umem::detail::single_writer_count(k.free_count, k.free_requested,
                                    static_cast<std::int64_t>(request));
  return true;
}

}  // namespace umem::alloc
