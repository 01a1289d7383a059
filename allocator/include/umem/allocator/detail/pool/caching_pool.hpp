// The caching pool: keeps memory obtained from an upstream_source and hands it out again without
// upstream calls, like PyTorch's CUDA caching allocator and RMM's pool. One instance serves one
// (NUMA binding, coherence kind); the allocator owns one per node and kind.
//
// Note [Small and large blocks]
// Requests whose rounded size is at most small_max are carved from small_segment_size
// segments ("small pool"); larger ones take the best-fitting free block of the large pool
// (splitting it), else grow the expandable segment (Note [Expandable segments]) or take a new
// segment of the request rounded up to large_segment_rounding. The two
// never share a segment: small, short-lived blocks scattered through big segments would keep
// those segments from ever becoming fully free, so they could never be trimmed. For the same
// reason a large block is only split when the remainder is itself large (> small_max, or
// small_grow_max: Note [Medium blocks]).
//
// Note [Medium blocks]
// With pool_config::small_grow_max below small_max (device pools, Note [Device pools] in
// allocator.cpp), a "medium" request (above small_grow_max, at most small_max) takes the
// best-fitting free small block if one fits, else the best-fitting free large block, else grows
// the large pool; it never takes a new small segment. A few medium blocks fill a 2 MiB small
// segment and strand its tail, which only small requests can use; in the large pool they fill the
// holes between large blocks instead (so its free blocks are split when the remainder exceeds
// small_grow_max). Trying the small pool first keeps a medium block with the small ones where
// they have room, as PyTorch's allocator does (it counts both as small, and its test suite checks
// that a 1 MiB tensor and the few bytes allocated after it share one segment). A medium block
// counts in the class that served it.
//
// Note [Expandable segments]
// With pool_config::expandable_segments (the default), the large pool asks the upstream for its
// segments with allocate_growable(), reserving expandable_reserve_bytes of address space, and
// remembers the newest growable one. A large request that no free block fits then grows that
// segment in place (upstream_source::grow, Note [Growable segments] in segment.hpp) by what its
// free tail block lacks, rounded up to large_segment_rounding, instead of taking a new segment:
// the tail merges with the growth, so memory cached at the end of the segment is never stranded
// next to a new segment that is a little larger (what made the cache 12 % larger than the peak
// in use on real training traces, docs/log/2026-11-30-trace-replay.md). When the upstream refuses
// the growth (it cannot grow, or the reservation is exhausted) the pool falls back to a new
// segment, which becomes the growable one if it is. A growth is checked against limit_bytes and retried after
// the upstream runs out exactly like a new segment (Note [Running out]): a growth that runs out
// is the call's one upstream attempt, never followed by a new segment. It counts as one
// upstream_allocs and adds to reserved_bytes but not to the segment gauge. A grown segment is
// one segment everywhere (owns(), snapshot(), trim()): it goes back to the upstream whole when
// it is entirely free; until then trim() gives back the pages of its free blocks (Note
// [Decommitted pages]), as PyTorch's empty_cache unmaps the free pages of its expandable
// segments. The default is on because it
// costs nothing with a source that cannot grow (the calls fall back to allocate()); turn it off
// for a source whose growth is much more expensive than a new segment. The small pool never
// grows: its segments are small_segment_size each.
//
// Note [Decommitted pages]
// An expandable segment rarely becomes entirely free, so neither trim() nor max_cached_bytes could
// give its cache back by returning whole segments alone. So the large pool gives back the pages
// of whole large_segment_rounding granules inside free large blocks (upstream_source::decommit,
// Note [Decommitted pages] in segment.hpp), largest free spans first: all of them in trim(),
// after the free segments went back; and, while its cache (reserved - allocated) is above
// max_cached_bytes, before it commits more memory (grows a segment, takes a new one, or reuses
// decommitted granules), until the cache is under the cap. reserved_bytes drops by what was given
// back. Handing out a block that covers decommitted granules counts them as reserved again
// (limit_bytes is checked as for a growth) after upstream_source::recommit made them usable (the
// host source checks the node's room and populates as for fresh memory, the system backing the
// pages on first touch otherwise; a device source maps them again). Doing it when memory
// is needed, not at every free, keeps frees free of system calls and gives back only what would
// otherwise be added on top. Pageable host memory can (also ROCr SVM with XNACK on), and so can
// CUDA device memory of growable segments (Note [Giving device pages back] in
// cuda_device_source.hpp); pinned memory (ROCr locks with XNACK off, CUDA registrations) and plain
// device allocations cannot: the first refusal for a segment turns it off for that segment. It
// trades page faults (or mappings) on reuse for memory: on real training traces it keeps the peak
// reserved within a few percent of the peak allocated (docs/log/2026-11-30-trace-replay.md).
//
// Note [Running out]
// try_allocate() never asks the upstream for a segment, a growth or given-back pages that would
// take reserved bytes past limit_bytes (or the call's headroom): it answers null naming the
// limit. It asks the upstream at most once per call; when the upstream runs out it answers null
// with the upstream's own words. Only out-of-memory becomes null; other failures still throw.
// What is tried next (thread caches, trim, and from the allocator stream blocks and spilling) is
// the reclaim ladder's (Note [Reclaim ladder] in reclaim_ladder.hpp); allocate() climbs it over
// this pool alone, and a final failure counts once in num_ooms and throws out_of_memory with the
// request, the pool's binding and coherence, the reason and its stats.
//
// Note [Fast path]
// With pool_config::thread_cache_bytes != 0 each thread keeps the blocks it frees in a cache of
// its own and reuses them without the pool's lock (thread_cache.hpp, Note [Thread cache]); the
// pool stays the owner of every block and of every decision the cache cannot make alone (unknown
// pointers, double frees, blocks freed on another thread). Cached blocks count as cached in the
// statistics (Note [Statistics with thread caches]). trim(), an allocation that runs out of
// memory, and a thread's exit return thread-cached blocks to the pool first.
//
// Note [Slab segments]
// The thread caches' small objects (Note [Slabs] in thread_cache.hpp) live in slabs of 64 KiB,
// carved from segments of small_segment_size that hold slabs only, so that each slab is aligned
// to its size (the host source aligns segments to 2 MiB) and a freed pointer's slab is found
// from its address alone. They count as small-pool segments. A slab handed to a thread counts in
// the pool's own figures as allocated (its bytes, its objects, its bytes as requested), for
// peaks, and is taken back out of callers' totals, where its objects count one by one: by their
// thread, or here for objects freed on another thread, which this pool's lock puts on the
// slab's remote stack. A slab whose thread exited stays here until its last object is freed. An
// upstream whose segments are not aligned to 64 KiB gets blocks for small requests, as without
// slabs.

// Note [Own segments]
// allocate_segment() serves callers that cache memory themselves and count what they hold as
// reserved, as if it came from cudaMalloc: PyTorch's private pools (CUDA graphs, MemPool) under
// umem. Carving their segments from this pool's free blocks would hide that memory from the
// reserved total while the caller counts it as new, and keep it cached twice. So such a
// request gets a segment of its own from the upstream (rounded up to large_segment_rounding,
// handed out whole, counted as one large-pool segment and allocation), subject to limit_bytes
// like any segment, never split, never cached: freeing it returns it to the upstream at once,
// as cudaFree does.
//
// Note [Headroom]
// allocate(), allocate_segment() and try_allocate() take the most bytes the call may add to the
// pool's reserved bytes: what a caller with a budget of its own across pools (the torch bridge's
// memory fraction, Note [Memory fraction] in bridge.hpp) has left. It bounds growths, new
// segments and reused given-back pages exactly like limit_bytes (Note [Running out]: refused
// without calling the upstream), so a refused request never leaves memory reserved behind it;
// blocks the cache already holds are always served. The ladder's retries ask for the headroom
// again (request::headroom in allocator.hpp), since trimming may have made more of it.
//
// Note [Statistics with thread caches]
// current, allocated and freed of allocated_bytes, requested_bytes and allocation are exact:
// what callers allocated and freed, whichever path served them. A peak is the highest value of
// the pool's own count, in which blocks waiting in thread caches and the free objects of slabs
// threads hold (Note [Slab segments]) still count as allocated: it may exceed the true peak by at
// most what the threads' caches held at that moment (bounded by thread_cache_bytes per thread,
// plus the free part of each thread's slabs). Set thread_cache_bytes = 0 for exact peaks.
//
// Thread safety: every member function may be called from any thread. One mutex per pool guards
// all of its state, including the upstream calls made for it (upstream_source is thread-safe);
// threads using pools of different nodes or kinds do not contend. Ownership: the pool owns its
// segments and returns them to the upstream in trim() and its destructor; the upstream and the
// optional global_peak_tracker must outlive it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "umem/allocator/detail/pool/free_list.hpp"
#include "umem/allocator/detail/pool/interval_set.hpp"
#include "umem/allocator/detail/pool/reclaim_ladder.hpp"
#include "umem/allocator/detail/pool/slab.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/placement.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/allocator/source/segment.hpp"
#include "umem/allocator/detail/pool/thread_cache_registry.hpp"
#include "umem/core/detail/address_map.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc {

struct pool_config {
  // Requests up to this size use the small pool (PyTorch's kSmallSize: its small pool takes
  // blocks of up to 1 MiB, so the two allocators count the same blocks as small).
  std::size_t small_max = std::size_t{1} << 20;
  std::size_t small_segment_size = std::size_t{2} << 20;      // segments of the small pool
  // Requests above this (and up to small_max) never take a new small segment: a free small block
  // or else the large pool (Note [Medium blocks]); 0 = small_max.
  std::size_t small_grow_max = 0;
  std::size_t large_segment_rounding = std::size_t{2} << 20;  // large segments: multiples of this
  std::size_t alignment = 256;       // of every block and of every size (like CUDA's)
  // reserved - allocated kept after a free; 0 = unlimited. Above it the pool returns fully free
  // segments, then gives back free pages inside large segments (Note [Decommitted pages]).
  std::size_t max_cached_bytes = 0;
  std::size_t limit_bytes = 0;       // most reserved bytes of this pool; 0 = no limit
  std::size_t thread_cache_bytes = 0;  // most bytes each thread caches (Note [Fast path]); 0 = off
  // Large misses grow one segment in place (Note [Expandable segments]).
  bool expandable_segments = true;
  // Address space reserved for each growable segment (a multiple of the alignment); reserving
  // costs no memory. A request larger than this reserves its own size.
  std::size_t expandable_reserve_bytes = std::size_t{256} << 30;
};

class caching_pool {
 public:
  // Throws umem::error(invalid_argument) for an inconsistent config: alignment not a power of
  // two; small_max, small_segment_size, large_segment_rounding or (when expandable)
  // expandable_reserve_bytes zero or not a multiple of alignment; small_segment_size <
  // small_max; small_grow_max above small_max, not a multiple of alignment, or below small_max
  // with thread caches on. `global`, when given, receives every change
  // of a current value (Note [Merged peaks] in pool_stats.hpp).
  caching_pool(upstream_source& upstream, node_binding binding, coherence kind,
               pool_config config = {}, global_peak_tracker* global = nullptr);
  // Returns every segment to the upstream. Blocks still allocated are lost to their holders (a
  // warning is logged with their count): free them before destroying the pool.
  ~caching_pool();
  caching_pool(const caching_pool&) = delete;
  caching_pool& operator=(const caching_pool&) = delete;

  static constexpr std::size_t unbounded = SIZE_MAX;  // no headroom of the caller's
  // At least `bytes` bytes aligned to config().alignment, adding at most `headroom` bytes to the
  // reserved bytes (Note [Headroom]), after this pool's own reclaim ladder (Note [Running out]).
  // Throws umem::error: invalid_argument for 0 or a size that overflows when rounded;
  // out_of_memory.
  void* allocate(std::size_t bytes, std::size_t headroom = unbounded);
  // A segment for `bytes` alone, returned to the upstream when freed (Note [Own segments]).
  // Throws as allocate() does.
  void* allocate_segment(std::size_t bytes, std::size_t headroom = unbounded);
  // The bottom of the reclaim ladder (Note [Running out]): allocate() (allocate_segment() with
  // `own_segment`) without reclaiming anything, from free blocks or with one upstream call. Out
  // of memory is a null pointer with the reason; counts neither retries nor OOMs. Throws
  // umem::error for anything else (invalid_argument as allocate() does, internal).
  attempt_result try_allocate(std::size_t bytes, std::size_t headroom = unbounded,
                              bool own_segment = false);
  // Rung 1 of the ladder: every thread's cached blocks back to this pool; the bytes returned.
  std::size_t flush_thread_caches();
  // The ladder's counters: one retry after a rung gave back memory; one failed request, thrown
  // as out_of_memory whose message starts with `context` and names the request, this pool, `why`
  // and its statistics.
  void count_retry();
  [[noreturn]] void throw_out_of_memory(std::size_t request, const std::string& why,
                                        const std::string& context = {});
  // Which of the calling thread's caches the fast path asks: `any` finds it in the registry when
  // the thread last used another pool (and an allocation creates it); `last_used` asks it only
  // when this pool was the thread's last: a compare of thread-local memory and no call, so that
  // the allocator's front end makes no call on a hit (Note [Fast front end]).
  enum class cache_lookup { any, last_used };
  // The fast path alone (Note [Fast path]), inline for the allocator's front end: a block from the
  // calling thread's cache, or nullptr (then allocate() decides). Never throws.
  template <cache_lookup lookup = cache_lookup::any>
  [[gnu::always_inline]] void* allocate_cached(std::size_t bytes) {
    return allocate_cached_or<lookup>(
        bytes, [] { return static_cast<void*>(nullptr); },
        [bytes](thread_cache& mine, std::size_t rounded) { return mine.take(rounded, bytes); });
  }
  // The same for a front end that finishes either way in a tail call: `miss()` where the cache
  // has no slab object for the request, `blocks(cache, rounded)` for a request above slab_max
  // (the bins' path). A front end whose miss and block path are calls out of line makes no call
  // on a slab hit and so saves no registers there (Note [Fast front end]).
  template <cache_lookup lookup, class Miss, class Blocks>
  [[gnu::always_inline]] void* allocate_cached_or(std::size_t bytes, Miss miss, Blocks blocks) {
    const std::size_t align = config_.alignment;
    // A request of 0 or above SIZE_MAX - align rounds to 0 here, rejected with the too big ones.
    const std::size_t rounded = (bytes + align - 1) & ~(align - 1);
    if (rounded - 1 >= thread_cache::largest_cached) return miss();
    thread_cache* mine = cache_for<lookup, true>();
    if (mine == nullptr) return miss();
    if (rounded > slab_max_) return blocks(*mine, rounded);
    if (void* p = mine->take_object(bytes)) return p;
    return miss();
  }
  // What a front end keeps of this pool to serve slab objects without loading the pool (Note
  // [Fast front end] in allocator.cpp): requests of 1 to slab_max bytes are slab objects (0:
  // none), found in the cache of the thread that used this pool last, by `serial`.
  struct slab_route {
    std::uint64_t serial = 0;
    std::size_t slab_max = 0;
  };
  slab_route slab_route_of() const { return {cache_serial_, slab_max_}; }
  // A slab object for a request of 1 to slab_max bytes from the cache of `serial` (a
  // slab_route's), or nullptr (then allocate() decides), as allocate_cached_or() does.
  [[gnu::always_inline]] static void* take_slab_object(std::uint64_t serial, std::size_t bytes) {
    thread_cache* mine = last_used_cache(serial);
    return mine == nullptr ? nullptr : mine->take_object(bytes);
  }
  // True when `p` was a live slab object of the cache of `serial` and is now free there.
  [[gnu::always_inline]] static bool put_slab_object(std::uint64_t serial, const void* p) {
    thread_cache* mine = last_used_cache(serial);
    return mine != nullptr && mine->put_object(reinterpret_cast<std::uintptr_t>(p));
  }
  // True when `p` went into the calling thread's cache; false: deallocate() decides.
  template <cache_lookup lookup = cache_lookup::any>
  [[gnu::always_inline]] bool deallocate_cached(const void* p) {
    thread_cache* mine = cache_for<lookup, false>();
    return mine != nullptr && mine->put(p);
  }
  // The same past the slab objects (the caller asked put_slab_object), for a front end that
  // finishes either way in a tail call, as allocate_cached_or(): `miss()` where the calling
  // thread has no cache here, `blocks(cache)` to try its bins.
  template <cache_lookup lookup, class Miss, class Blocks>
  [[gnu::always_inline]] void deallocate_block_cached_or(Miss miss, Blocks blocks) {
    thread_cache* mine = cache_for<lookup, false>();
    if (mine == nullptr) return miss();
    return blocks(*mine);
  }
  // Returns a block from allocate() to the cache; nullptr is ignored. Throws
  // umem::error(invalid_argument) naming the pointer for a double free or a pointer this pool did
  // not hand out, and changes nothing then.
  void deallocate(void* p);
  // The same for a pointer that may belong to another pool: returns false, changing nothing,
  // when `p` lies in none of this pool's segments (one lock, where owns() + deallocate() take two).
  bool deallocate_if_owned(void* p);
  // True when `p` lies inside one of this pool's segments (allocated or not).
  bool owns(const void* p) const;
  // The usable size of the live allocation starting at `p` (>= the request, a multiple of the
  // alignment). Throws umem::error(invalid_argument) if `p` is not one.
  std::size_t block_size(const void* p) const;
  // Returns every fully free segment to the upstream and gives back the free pages of the others
  // where the upstream can (Note [Decommitted pages]); the number of bytes released.
  std::size_t trim();

  pool_stats stats() const;
  pool_snapshot snapshot() const;
  void reset_peak_stats();
  // The allocator placed an allocation here that was meant for another node.
  void count_spill();
  // Starts reporting to `global` (what the constructor's argument does), adding this pool's
  // current values and peaks to it (global_peak_tracker::absorb). Throws
  // umem::error(invalid_argument) when the pool already reports to a tracker.
  void attach_global(global_peak_tracker& global);

  const node_binding& binding() const { return binding_; }
  coherence kind() const { return kind_; }
  const pool_config& config() const { return config_; }
  // "node 0 (bind), fine": used in messages.
  std::string describe() const;

 private:
  struct segment_record {
    segment seg;
    block* first = nullptr;  // the block at seg.base (lives as long as the segment)
    size_class pool = size_class::large_pool;
    bool slabs = false;  // a slab segment (Note [Slab segments]); its pool is small
    // Granules whose pages were given back (Note [Decommitted pages]), all inside free blocks.
    interval_set decommitted;
    bool keeps_pages = false;  // the upstream refused to decommit here: never asked again
  };
  struct live_block {
    block* b = nullptr;
    size_class pool = size_class::large_pool;
    bool own_segment = false;  // Note [Own segments]: its segment goes back with it
  };

  using live_map = umem::detail::address_map<live_block>;  // Note [Address map]
  // A block just handed out and the live ticket mark_live gave it (Note [Block tickets] in
  // free_list.hpp), for the caller's thread cache.
  struct ticketed_block {
    block* b = nullptr;
    std::uint64_t ticket = 0;
  };
  // What allocate() and allocate_segment() (`own_segment`, always large) make of a request, or
  // invalid_argument.
  struct sizing {
    std::size_t rounded = 0;        // to the alignment
    size_class pool = size_class::large_pool;
    std::size_t segment_bytes = 0;  // of a new segment for it
    bool medium = false;            // small, but large when no free small block fits
  };
  sizing size_request(std::size_t bytes, bool own_segment) const;
  // Releases that were not callers' frees (thread-cached blocks returned to the pool), and the
  // difference between what callers' locked frees released and what the pool had counted for
  // those blocks (requested bytes change when a thread cache reuses a block): both per class,
  // for Note [Statistics with thread caches].
  struct cache_returns {
    std::array<std::int64_t, 2> bytes{}, count{}, requested{}, requested_adjust{};
  };

  free_list& list_of(size_class c) { return c == size_class::small_pool ? small_ : large_; }
  free_list& list_of(const segment_record& r) { return r.slabs ? slab_chunks_ : list_of(r.pool); }
  // Note [Slab segments]. Objects of what allocate_cached() serves from slabs, past its miss.
  void* allocate_object(thread_cache& mine, std::size_t rounded, std::size_t bytes,
                        std::size_t headroom, std::string& why);
  // A slab of `size_class` for `owner`, or null (out of memory: `why`; or slab segments are not
  // possible here). mutex_ held.
  slab* new_slab(std::size_t size_class, thread_cache& owner, std::string& why);
  // Every slab is the pool's again (empty) or has no owner. mutex_ held.
  void release_slab(slab* s);
  // A caller's free of an object of `s` on the locked path. mutex_ held.
  void free_object(slab* s, std::uintptr_t address);
  // The live slab holding `address`, or null. mutex_ held.
  slab* slab_at(std::uintptr_t address) const;
  // The registry's give_back: `cache`'s stolen blocks and slabs back to this pool.
  std::size_t take_back(thread_cache& cache, std::vector<block*>& blocks, bool exiting);
  std::size_t small_grow_max() const {
    return config_.small_grow_max == 0 ? config_.small_max : config_.small_grow_max;
  }
  // A new large segment for `rounded` bytes (which the caller checked cannot overflow).
  std::size_t large_segment_bytes(std::size_t rounded) const {
    const std::size_t r = config_.large_segment_rounding;
    return (rounded + r - 1) / r * r;
  }
  // `returned`: blocks a thread cache gave back (thread_cache::return_big), released first. Out
  // of memory: a null block, `why` says why (Note [Running out]).
  ticketed_block allocate_locked(std::size_t bytes, const sizing& z, std::size_t headroom,
                                std::span<block* const> returned, std::string& why);
  attempt_result try_own_segment(std::size_t bytes, const sizing& z, std::size_t headroom);
  void* climb_alone(std::size_t bytes, std::size_t headroom, bool own_segment);
  class headroom_scope;
  std::size_t reserved_cap() const;
  void release_cached(block* b);
  void return_to_list(const live_block& live);
  // Adds `delta` to metric m of class c and of all classes, here and in the global statistics.
  void add_to_stats(metric m, size_class c, std::int64_t delta);
  // These three: null (nullopt) when out of memory, with `why`.
  block* new_segment_block(std::size_t block_bytes, std::size_t segment_bytes, size_class c,
                           std::string& why);
  // `slabs`: a slab segment (Note [Slab segments]).
  block* add_segment(const segment& seg, size_class c, bool slabs = false);
  void insert_live(block* b, const live_block& lb);
  // Gives `b` (already in live_) its requested size and a live ticket, and counts it.
  ticketed_block mark_live(block* b, size_class c, std::size_t bytes);
  std::size_t release_segment(block* first, size_class c);
  std::optional<segment> obtain_segment(std::size_t segment_bytes, bool growable,
                                        std::string& why);
  // Also null with an empty `why` when there is no growable segment or it cannot grow.
  block* grow_block(std::size_t block_bytes, std::string& why);
  bool over_limit(std::size_t more) const;
  std::string limit_text(std::size_t more, const char* what) const;
  std::size_t release_free_segments(std::size_t keep_cached);
  // While the cache (reserved - allocated) is over max_cached_bytes: after a free, whole free
  // segments go back; before the pool commits more memory, free pages go back too (Note
  // [Decommitted pages]).
  void release_segments_over_cache_cap();
  void decommit_pages_over_cache_cap();
  std::size_t decommit_free_pages(std::size_t keep_cached);
  void recommit(segment_record& rec, std::uintptr_t begin, std::uintptr_t end);
  std::size_t cached_bytes() const;
  std::size_t reserved_now() const;  // takes mutex_
  void release_live(const live_block& live);
  // A caller's free on the locked path of a live block or slab object at `address`; false when
  // none starts there. mutex_ held.
  bool free_locked(std::uintptr_t address);
  // The record of the segment holding `address`, or null. mutex_ held.
  const segment_record* segment_at(std::uintptr_t address) const;
  [[noreturn]] void fail_bad_free(const void* p) const;
  [[noreturn]] void fail_cached_free(const void* p) const;
  std::string stats_summary() const;
  // The calling thread's cache (created on first use), or nullptr; the registry's mine() without
  // loading the registry when the thread used this pool last (the common case).
  thread_cache* my_cache() {
    const detail::last_thread_cache& last = detail::t_last_cache;
    return last.serial == cache_serial_ ? last.cache : threads_->mine();
  }
  // The same without creating it.
  thread_cache* my_cache_if_any() {
    const detail::last_thread_cache& last = detail::t_last_cache;
    return last.serial == cache_serial_ ? last.cache : threads_->mine_if_any();
  }
  // The cache a fast path asks (cache_lookup): an allocation's (`create`) or a free's.
  template <cache_lookup lookup, bool create>
  thread_cache* cache_for() {
    if constexpr (lookup == cache_lookup::last_used) return last_used_cache(cache_serial_);
    else return create ? my_cache() : my_cache_if_any();
  }
  // The calling thread's cache if the pool of `serial` was the last it used, else nullptr.
  [[gnu::always_inline]] static thread_cache* last_used_cache(std::uint64_t serial) {
    const detail::last_thread_cache& last = detail::t_last_cache;
    if (last.serial != serial) return nullptr;
    // Serials start at 1 and come only with a cache (thread_cache_registry.cpp).
    if (last.cache == nullptr) __builtin_unreachable();
    return last.cache;
  }

  upstream_source& upstream_;
  const node_binding binding_;
  const coherence kind_;
  const pool_config config_;

  mutable std::mutex mutex_;  // guards everything below
  std::shared_ptr<void> fork_ = lock_around_fork(mutex_, fork_rank::pool);  // Note [Fork]
  global_peak_tracker* global_;
  free_list small_;
  free_list large_;
  std::map<std::uintptr_t, segment_record> segments_;  // by base address
  std::uintptr_t growable_ = 0;  // base of the large segment that grows; 0: none
  std::size_t decommitted_bytes_ = 0;  // in all segments
  std::size_t call_cap_ = unbounded;   // reserved bytes the current call may reach (Note [Headroom])
  live_map live_;  // allocated blocks by address
  pool_stats stats_;
  cache_returns returns_;
  // Note [Slab segments]. slab_max_: requests up to this are slab objects (0: none).
  struct slab_figures {
    std::int64_t bytes = 0, count = 0, requested = 0;
  };
  const std::size_t slab_max_;
  bool slab_segments_fail_ = false;  // the upstream's segments are not aligned to a slab
  free_list slab_chunks_;
  umem::detail::address_map<slab*> slabs_by_granule_;
  std::deque<slab> slab_records_;
  std::vector<slab*> spare_slab_records_;
  slab_figures slabs_handed_out_, slabs_given_back_;  // in the pool's own figures
  slab_figures remote_frees_;                          // objects freed through this lock
  // Declared last, reset first in the destructor: a thread that exits while the pool is being
  // destroyed must not give blocks back into it (Note [Thread cache lifetime]).
  std::unique_ptr<thread_cache_registry> threads_;
  const std::uint64_t cache_serial_;  // threads_->serial(), kept here for the fast path
};

}  // namespace umem::alloc
