// The free-list policy of the caching pool, apart from its mechanics (locking, upstream calls,
// statistics): blocks carved from segments, best fit by size, splitting and coalescing.
// It handles addresses as numbers and never touches the memory, so it is tested with fake ones.
//
// Note [Why blocks never cross segments]
// Two segments may be adjacent in the address space by chance, but each is a separate mmap with
// its own mbind policy (possibly another NUMA node) and its own GPU registration (SVM attributes
// or a lock to one CPU agent's pool). A block spanning both would have two bindings and could not
// be returned to the upstream as one range. So a block's neighbours (prev/next) are only blocks
// of the same segment, and coalescing stops at the segment's edges. A segment that grows in
// place (extend_segment) is still one segment: the grown range is part of the same reservation
// with the same binding and is returned with it, so blocks may span it.
//
// Contract: not thread-safe (the owning caching_pool locks around it). The free_list owns its
// block records; a block* stays valid until release() merges it into its lower neighbour or
// remove_segment() drops it. The block at a segment's base is never merged away (merging keeps
// the lower block), so it lives as long as the segment: owners may keep it as the segment's
// first block and walk `next` from it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <set>
#include <vector>

namespace umem::alloc {

// Note [Block tickets]
// `ticket` = generation << 2 | state, the one word a thread cache and the pool agree on without
// sharing a lock (thread_cache.hpp, Note [Thread cache]). The pool starts a new generation each
// time it hands the block out (state live); a thread cache moves it live -> cached at a free and
// back to live at reuse; the pool sets free when the block returns to the free list. Generations
// only grow, also when a record is reused for another block, so an old ticket never matches again.
namespace ticket {
enum state : std::uint64_t { free = 0, live = 1, cached = 2 };
constexpr std::uint64_t state_of(std::uint64_t t) { return t & 3U; }
constexpr std::uint64_t with_state(std::uint64_t t, state s) { return (t & ~std::uint64_t{3}) | s; }
constexpr std::uint64_t next_live(std::uint64_t t) { return (((t >> 2) + 1) << 2) | live; }
}  // namespace ticket

// Cache-line aligned: threads write the tickets of their own blocks without a lock, and records of
// blocks held by different threads must not share a line (false sharing doubled the time of
// two threads' fast paths).
struct alignas(64) block {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  std::uintptr_t segment_base = 0;  // the segment it was carved from
  std::size_t requested = 0;        // bytes asked for when the pool handed it out, else 0
  bool allocated = false;           // not in the free set (handed out, or in a thread cache)
  block* prev = nullptr;  // neighbour at the next lower address in the same segment
  block* next = nullptr;  // neighbour at the next higher address in the same segment
  std::atomic<std::uint64_t> ticket{0};         // Note [Block tickets]
  std::atomic<std::size_t> live_requested{0};  // the current holder's request
};

class free_list {
 public:
  // A split leaves a free remainder only when it is at least `min_split_remainder` bytes;
  // smaller remainders stay inside the allocated block (less fragmentation). Must be > 0.
  explicit free_list(std::size_t min_split_remainder);
  free_list(const free_list&) = delete;
  free_list& operator=(const free_list&) = delete;

  // Registers the segment [base, base + size) as one free block and returns it.
  block* add_segment(std::uintptr_t base, std::size_t size);

  // The smallest free block of at least `bytes` (lowest address among equal sizes), or nullptr.
  block* best_fit(std::size_t bytes) const;

  // Marks the free block `b` allocated for `bytes` (<= b->size), splitting off the tail as a new
  // free block when the remainder is large enough. Returns b.
  block* take(block* b, std::size_t bytes);

  // Marks the allocated block `b` free and merges it with free neighbours of its segment.
  // Returns the resulting free block (b or its lower neighbour; b is then no longer valid).
  block* release(block* b);

  // The segment whose last block is `last` (last->next == nullptr) grew by `extra` bytes at its
  // end: a free `last` absorbs them, otherwise they become a new free block after it. Returns
  // the free block that ends the segment now.
  block* extend_segment(block* last, std::size_t extra);

  // True when `b` is free and spans its whole segment (no neighbours).
  static bool is_free_segment(const block* b) { return !b->allocated && !b->prev && !b->next; }

  // Every free block that spans its whole segment, largest first.
  std::vector<block*> free_segments() const;
  // How many there are, without walking the free blocks.
  std::size_t free_segment_count() const { return free_segment_count_; }

  // Forgets a segment whose single block `b` satisfies is_free_segment(b).
  void remove_segment(block* b);

  std::size_t free_bytes() const { return free_bytes_; }
  std::size_t free_block_count() const { return free_.size(); }

 private:
  // Order of the free set: (size, address), so lower_bound finds the best fit.
  struct by_size_then_address {
    using is_transparent = void;
    struct key {
      std::size_t size;
      std::uintptr_t address;
    };
    static key of(const block* b) { return {b->size, b->address}; }
    static key of(const key& k) { return k; }
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      const key ka = of(a);
      const key kb = of(b);
      return ka.size != kb.size ? ka.size < kb.size : ka.address < kb.address;
    }
  };

  block* new_block();
  void recycle(block* b);
  void insert_free(block* b);
  void erase_free(block* b);

  using free_set = std::set<block*, by_size_then_address>;

  std::size_t min_split_;
  free_set free_;
  // Tree nodes of free_ kept after an erase and reused by the next insert: a take/release pair
  // then allocates nothing (bounded, so a burst of frees does not pin memory).
  std::vector<free_set::node_type> spare_nodes_;
  std::size_t free_bytes_ = 0;
  // Free blocks spanning their segment. A block's neighbours do not change while it is in the
  // free set (neighbouring free blocks are always merged), so insert/erase keep this exact.
  std::size_t free_segment_count_ = 0;
  std::deque<block> storage_;   // stable addresses; records are reused, not returned
  std::vector<block*> spare_;  // recycled records of storage_
};

}  // namespace umem::alloc
