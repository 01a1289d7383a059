// The PyTorch bridge: one umem allocator serving PyTorch's allocations per device (each device's
// memory on its NUMA node), CPU tensors on chosen nodes, stream-ordered reuse with blocks used on
// several streams, PyTorch's statistics per device, a per-device memory fraction, the
// out-of-memory message PyTorch users know, and the GPU-access verdict zero-copy aliases rely on.
// umem_torch.h is its C face; docs/torch-bridge.md its semantics.
//
// Note [Sizes PyTorch sees]
// PyTorch's caching allocator rounds every request up to a multiple of 512 bytes and counts
// that rounded size in allocated_bytes and active_bytes; its own tests and tools (memory
// snapshots, graph memory accounting) expect it. The bridge asks umem for the rounded size and
// reports it, so statistics mean the same with either allocator; reserved_bytes are umem's real
// segments. Blocks of at most 1 MiB count in the "small_pool" statistics, larger ones in
// "large_pool", as in PyTorch.
//
// Thread safety: every member function may be called from any thread.
//
// Note [One lock]
// One mutex guards the bridge's GPU statistics, its live GPU blocks and the stream-ordered cache
// (stream_ordered_cache has no lock of its own), so a PyTorch malloc that reuses a block freed on
// its stream takes that one lock and no other, and a free takes it once. A malloc the cache cannot
// serve takes it again after the umem allocator (its own pools' locks) has served it: the
// allocator's work, which may ask the system for memory, runs outside the bridge's lock. The
// cache's release callback runs under the lock and returns blocks to the allocator there.
//
// Note [A device's sole stream]
// PyTorch's caching allocator gives a block freed on its allocation stream back to that stream's
// free blocks at once, coalesced with its neighbours, and never hands it to another stream.
// umem's pools know no streams, so such a block waits in the stream-ordered cache until a fence
// shows that its stream passed the free (Note [Lazy stream fences]); while the GPU runs behind
// the CPU those blocks serve neither other sizes nor coalescing, so the pool grows instead, and
// each cache miss records and queries events. Most processes allocate on one stream per device.
// So while a single stream has allocated on a device whose memory is a pool of its own (a
// discrete GPU; a unified GPU's node pools also serve CPU memory) that gives nothing back by
// itself (max_cached 0), a block freed on that stream and used nowhere else goes straight back
// to the pool, as in PyTorch: its only other taker is that same stream, in order. Before any of
// that pool's memory may go elsewhere, the bridge waits for the stream: once when a second
// stream allocates on the device (from then on, frees wait in the cache again), and before every
// trim (empty_cache and the reclaim ladder's trim rung, both bridge::trim). A trim gives memory
// back outside the bridge's lock, so while one runs the sole stream's frees wait in the cache as
// well: a straight free could reach a segment the trim gives back while the stream still uses
// the block (ROCr frees without waiting for kernels). After the trim they go straight again.
// Which GPUs are discrete is asked on each one's first allocation, not when the bridge
// starts, since asking creates the GPU's memory source (a driver context). A second stream
// appearing during a graph capture, when waiting is illegal, gets a segment of its own (Note [Own
// segments] in caching_pool.hpp) until no capture is underway; frees during a capture go through
// the cache as before.
//
// Note [Host path]
// CPU tensors (allocate_host: PyTorch's CPU allocator once umem is it) have no streams, so they
// need none of mutex_'s state. Intra-op kernels and data-loading threads allocate CPU tensors from
// several threads at once, and behind mutex_ two such threads took 4 times PyTorch's time per
// alloc+free (bench/torch_alloc/cpu_alloc_free.py): they slept on the mutex and moved the shared
// counters and table between their cores on every call. So CPU tensors write nothing two threads
// share on their way: their statistics are per thread (host_statistics.hpp), and their live
// blocks are spread over host_shards tables by address, each behind a spin lock (Note [Spin lock]
// in spin_lock.hpp), so two threads meet in one only when their blocks hash alike. The host's
// statistics and the GPUs' are counted apart, so the peaks of everything together (all_devices)
// add the two peaks: at least the true joint peak, exact when only one of them allocates.
//
// Note [Host blocks in flight]
// A CPU tensor in umem memory is registered (pinned) memory wherever a GPU runtime is loaded, so a
// non_blocking copy to or from it is a transfer the GPU makes after the call returned, and Python
// may drop the tensor before it ran: umem would hand the block out again while the GPU still
// reads it. (Pageable memory is safe: the runtime stages it before the call returns.) PyTorch's
// own pinned blocks are kept until events on the copy's stream completed: every non_blocking copy
// calls the host allocator's record_event (aten/src/ATen/native/cuda/Copy.cu). Where umem is that
// host allocator (PyTorch 2.8 and later, at::setHostAllocator; the extension's
// pinned_memory_allocator.hpp), record_host_use lists the copy's stream for the block, and its free
// hands the block to the stream-ordered cache as a block used on those streams (Note [Blocks used
// on several streams] in stream_ordered_cache.hpp), which gives it back to the pool once their
// work queued at the free has completed. A block keeps the streams of the first GPU that used it;
// a second GPU's use is not recorded (record_host_use says so, and the extension logs it). Up to
// 2.7 PyTorch's own host allocator receives record_event and knows no umem block.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/core/detail/address_map.hpp"
#include "umem/core/detail/spin_lock.hpp"
#include "umem/torch_bridge/host_statistics.hpp"
#include "umem/torch_bridge/stream_ordered_cache.hpp"

namespace umem::torch_bridge {

// Whether the GPU may touch a host range in place, and why (quoted to users who asked for an
// alias).
struct gpu_access {
  bool accessible = false;
  bool umem_memory = false;      // the range is a live allocation of this bridge
  bool host_accessible = true;   // false for a discrete GPU's own memory
  // Not accessible, but register_alias makes it so for an alias's life: memory umem did not
  // allocate, pinned by the GPU mapper (gpu_mapper::pins_foreign), where every GPU uses host
  // memory as its own (all_gpus_unified).
  bool registrable = false;
  std::string reason;
};

// PyTorch's DeviceStats, as far as umem keeps them; arrays are indexed by alloc::size_class
// (all, small_pool, large_pool).
struct device_stats {
  using by_class = std::array<alloc::stat, alloc::size_class_count>;
  by_class allocation, segment, active, allocated_bytes, reserved_bytes, active_bytes,
      requested_bytes;
  std::int64_t num_alloc_retries = 0;
  std::int64_t num_ooms = 0;
  std::int64_t num_device_alloc = 0;  // segments obtained from the upstream
  std::int64_t num_device_free = 0;
};

// One block of a segment, as PyTorch's snapshots describe it.
struct block_view {
  std::size_t size = 0;
  std::size_t requested = 0;
  bool allocated = false;  // handed to PyTorch
  bool active = false;     // allocated, or freed but waiting for its streams
};
struct segment_view {
  std::uintptr_t address = 0;
  std::size_t size = 0;
  bool is_large = false;
  std::vector<block_view> blocks;  // in address order, covering the segment
};

// Note [Call trace]
// What the calling thread's last bridge::allocate() or deallocate() did, for the one-call
// benchmark (bench/torch_bridge), which reads it after each timed call to say why a slow one was
// slow. Thread-local plain stores (initial-exec TLS, 12 bytes): no call, no lock, nothing shared
// between threads.
struct call_trace {
  bool stream_cache = false;    // allocate: served by a block freed on its stream
  bool allocator = false;       // allocate: went to the umem allocator
  bool release_scan = false;    // allocate: looked for blocks whose streams are done
  std::uint32_t released = 0;   // blocks returned to the allocator during the call
  bool live_rehash = false;     // the table of live blocks grew its buckets
  std::uint8_t locks = 0;       // times the bridge's mutex was taken
};
const call_trace& last_call_trace() noexcept;

// PyTorch's largest "small_pool" block (Note [Sizes PyTorch sees]).
inline constexpr std::size_t small_pool_limit = std::size_t{1} << 20;

// 2^60: PyTorch refuses such a request before trying ("more than 1EB").
inline constexpr std::uint64_t one_exabyte = std::uint64_t{1} << 60;

class bridge {
 public:
  // This machine: live discovery, the selected GPU backend's mapper and stream events.
  // `events` (may be empty) replaces the backend's events (umem_torch_set_event_provider).
  bridge(const alloc::alloc_options& options, event_factory events);
  // Explicit parts (tests): `host_memory_gpu_accessible` says whether memory not from umem is
  // GPU-accessible (XNACK on, pageable memory access); `no_gpu_reason` explains when it is not.
  bridge(std::unique_ptr<alloc::allocator> a, event_factory events, bool host_memory_gpu_accessible,
         std::string no_gpu_reason);
  ~bridge();
  bridge(const bridge&) = delete;
  bridge& operator=(const bridge&) = delete;

  // A block of at least `bytes` for `device` (>= 0) used on `stream` (Note [Sizes PyTorch
  // sees]). Throws umem::error: out_of_memory with PyTorch's first line ("CUDA out of memory.
  // Tried to allocate ... GPU d has a total capacity of ...", HIP on ROCr) and umem's detail,
  // once the allocator's reclaim ladder (its second rung waits for this bridge's pending blocks)
  // found nothing; invalid_argument (size 0, unknown device).
  void* allocate(std::size_t bytes, int device, void* stream);
  // Frees a live allocation of allocate(); it waits for its stream (and the streams
  // record_stream named) before another stream may get it. Throws umem::error(not_found) for a
  // pointer that is not a live allocation, changing nothing.
  void deallocate(void* p);
  // PyTorch's Tensor.record_stream: `p` (a live allocation) is also used on `stream`.
  void record_stream(void* p, void* stream);
  // Whether `p` is a live allocation of allocate() or allocate_host().
  bool owns(const void* p) const;

  // Memory PyTorch's own caching allocator takes for its private pools (graph captures,
  // MemPools): the device's umem memory, left out of this bridge's statistics since PyTorch counts
  // what it does with it (a pool segment is not reserved twice). Each is a segment of its own,
  // given back to the system when PyTorch frees it, as cudaMalloc's would be (Note [Own
  // segments] in caching_pool.hpp). Throws like allocate().
  void* allocate_segment(std::size_t bytes, int device);
  void deallocate_segment(void* p);

  // CPU tensors: `node` >= 0 binds to that node, -1 uses the configured placement.
  void* allocate_host(std::size_t bytes, int node);
  void deallocate_host(void* p);
  // `stream` of GPU `device` transfers to or from the live host block `p` (PyTorch's record_event):
  // its free waits for the stream's work (Note [Host blocks in flight]). False, recording nothing,
  // when `p` is no live host block or the block was used by another GPU's streams already.
  bool record_host_use(void* p, void* stream, int device);

  // What PyTorch's own caching allocator holds for `device` (its private pools' segments): counts
  // against the memory fraction's cap, since PyTorch's fraction covers all of a device's memory.
  void set_external_reserved(int device, std::uint64_t bytes);

  // A graph capture begins / ends somewhere in the process (Note [Frees during graph capture]
  // in stream_ordered_cache.hpp): while one is underway no event is queried or recorded.
  void capture_begin();
  void capture_end();

  std::size_t empty_cache(bool device_synchronized);
  // PyTorch's set_per_process_memory_fraction: 0 <= fraction <= 1 of the device's capacity
  // (mem_get_info's total without a cap); 1 removes the cap.
  //
  // Note [Memory fraction]
  // As in PyTorch's caching allocator, the cap bounds the memory reserved for the device (umem's
  // pools, less the segments lent to PyTorch's private pools, plus what those pools reserve), not
  // the bytes allocated: a request the cache serves always passes, and one that would make the
  // reservation grow past the cap is refused before anything is reserved for it (the pools get
  // what the cap leaves as headroom, Note [Headroom] in caching_pool.hpp, asked again before each
  // attempt of the reclaim ladder since its rungs give memory back), once the cache has been
  // given back. Refusing after the fact would not do: an expandable segment that grew for
  // the refused request keeps the growth, and the retry would then get it for free.
  void set_memory_fraction(double fraction, int device);
  double memory_fraction(int device) const;
  // {free, total} bytes (umem_torch.h).
  std::pair<std::uint64_t, std::uint64_t> mem_get_info(int device) const;
  // PyTorch's keys (docs/torch-bridge.md) for `device` >= 0, of every device and the host
  // (all_devices; its peaks add the GPUs' and the host's, Note [Host path]), or of the host's
  // allocations alone (host: CPU tensors; reserved and segments are those of every host-memory
  // pool, which on an APU hold GPU tensors too).
  static constexpr int all_devices = -1;
  static constexpr int host = -2;
  std::map<std::string, std::int64_t> memory_stats(int device) const;
  device_stats stats(int device) const;
  void reset_peak_stats(int device);
  void reset_accumulated_stats(int device);
  // The segments holding `device`'s memory and their blocks.
  std::vector<segment_view> segments(int device) const;

  gpu_access access(const void* p, std::size_t bytes) const;
  // For a zero-copy alias of [p, p + bytes): memory umem did not allocate that access() calls
  // GPU-accessible is made usable by the GPU runtime's own calls while the handle lives
  // (gpu_mapper::register_foreign; null when nothing is needed, as for umem's own memory). Throws
  // umem::error(unsupported) with the reason when the memory cannot be aliased.
  std::shared_ptr<void> register_alias(const void* p, std::size_t bytes);
  // The NUMA node device's memory goes to.
  int node_of_device(int device) const;
  // Whether `device`'s tensors are host memory the GPU uses in place (a unified GPU, or a backend
  // without a device memory source) rather than the GPU's own memory. Throws
  // umem::error(invalid_argument) for an unknown device.
  bool device_memory_is_host(int device) const;

  alloc::allocator& allocator() { return *alloc_; }
  const alloc::allocator& allocator() const { return *alloc_; }
  std::string describe() const;

 private:
  struct usage {  // one device's share (guarded by mutex_), or the host's (host_.lock)
    device_stats::by_class allocated, requested, allocation, active, active_bytes;
    std::int64_t num_ooms = 0;
    std::int64_t num_alloc_retries = 0;
    std::int64_t stream_reuses = 0;
    double fraction = 1.0;
    std::optional<std::uint64_t> cap_bytes;
    std::int64_t lent_bytes = 0;  // allocate_segment's blocks, counted by PyTorch itself
    std::int64_t lent_segments = 0;
    std::int64_t external_bytes = 0;  // set_external_reserved
    std::array<device_stats::by_class*, 5> gauges() {
      return {&allocated, &requested, &allocation, &active, &active_bytes};
    }
  };
  struct live_block {
    std::size_t requested = 0;  // PyTorch sees reported_size(requested) (Note [Sizes PyTorch sees])
    void* stream = nullptr;
    // Other streams (record_stream), which few blocks have: out of line, so that an entry takes
    // 32 bytes and two share a cache line (Note [Address map]).
    std::unique_ptr<std::vector<void*>> uses;
    int device = -1;
    bool shared() const { return uses && !uses->empty(); }
  };
  alloc::request request_for(int device) const;
  // f(usage&) for `device`'s share (>= 0), or every device's and the total (all_devices), under
  // mutex_, which this takes.
  template <class F>
  void for_each_usage(int device, F&& f);
  // A copy of the GPU blocks' usage statistics of `device` (>= 0, or all_devices; empty for
  // host). mutex_ held.
  usage gpu_usage(int device) const;
  // Adds the CPU tensors' statistics to `u` (all_devices' peaks then add the two peaks, Note
  // [Host path]). Takes no lock of the bridge's (host_statistics has its own).
  void add_host_usage(usage& u) const;
  // The cache_ and this bridge's rung of the allocator's reclaim ladder (the constructors' part).
  void attach(event_factory events);
  // `r` from the allocator, whose reclaim ladder does all the retrying (Note [Reclaim ladder] in
  // reclaim_ladder.hpp; its retries count in num_alloc_retries), then throw_oom. With `cap`
  // (Note [Memory fraction]) each attempt may add at most what the cap leaves.
  void* allocate_capped(std::size_t bytes, alloc::request r, int device,
                        std::optional<std::uint64_t> cap = std::nullopt);
  // What the memory fraction caps: the pools' reserved bytes of `device` less the segments lent
  // to PyTorch's own pools, plus what those pools reserve (set_external_reserved).
  std::int64_t reserved_for_cap(int device) const;
  [[noreturn]] void throw_oom(std::size_t bytes, int device, const std::string& detail);
  // The statistics of an allocation of `reported` bytes (`requested` asked for) and of its free.
  static void count_allocate(usage& u, std::size_t reported, std::size_t requested, bool reused);
  static void count_free(usage& u, std::size_t reported, std::size_t requested, bool active);
  // Frees `p` when it is a live GPU (host) block; false when it is not one.
  bool free_device_block(void* p);
  bool free_host_block(void* p);
  // Hands a freed host block that record_host_use named to cache_; false when it has no uses.
  bool hold_host_block(void* p, std::size_t reported);
  // cache_->release_all under mutex_; the bytes released.
  std::size_t release_held(bool synchronized);
  // allocator::trim between a wait for every device's sole stream (unless `synchronized`) and
  // the trim's end, while frees_at_once sends frees to the cache; nothing during a capture. The
  // bytes given back.
  std::size_t trim(bool synchronized);
  // Whether a free of `l` goes straight back to the allocator: host memory, or the block of a
  // device's sole stream used nowhere else, outside captures and trims. mutex_ held.
  bool frees_at_once(const live_block& l) const;
  // Whether `stream` may allocate from `device`'s pool: false when it is a second stream while a
  // capture is underway, or while the sole stream's work cannot be waited for (the event factory
  // gave no event for the device); it then gets a segment of its own. Ends the sole stream when
  // another stream comes, after waiting for it. mutex_ held.
  bool admit_stream(int device, void* stream);
  // Whether device's frees may skip the stream cache while one stream uses it: a discrete GPU,
  // with stream events and max_cached 0. Asked once per device, without mutex_ held.
  bool sole_candidate(int device);
  // The cache's release callback, called under mutex_ (Note [One lock]).
  void released(const held_block& b, bool shared);
  // {free, total} before the memory fraction's cap: the GPU's own memory (discrete), else the
  // NUMA node's as the kernel reports it; free includes umem's unused cache there.
  std::pair<std::uint64_t, std::uint64_t> capacity(int device) const;
  // Whether device's memory is the GPU's own (a discrete GPU) rather than its node's.
  bool discrete(int device) const;
  // Whether every GPU uses host memory as its own (an APU, a unified part): only there is pinning
  // memory umem did not allocate for an alias as good as its own memory (on a discrete GPU an
  // alias of host memory reads it across the bus, where a copy would be in device memory).
  // Asked once (it may create the GPUs' device pools).
  bool all_gpus_unified() const;
  // {reserved, allocated} bytes of the pools holding device's memory; `own`: discrete(device),
  // passed in by callers that asked the driver already.
  std::pair<std::int64_t, std::int64_t> reserved_of(int device, bool own) const;

  std::unique_ptr<alloc::allocator> alloc_;
  bool host_memory_gpu_accessible_ = false;
  std::string no_gpu_reason_;
  mutable std::once_flag unified_once_;
  mutable bool all_gpus_unified_ = false;
  std::unique_ptr<stream_ordered_cache> cache_;
  std::atomic<int> captures_{0};
  std::atomic<int> capped_devices_{0};  // devices whose usage has a cap_bytes
  mutable std::mutex mutex_;     // guards what follows and cache_ (Note [One lock])
  std::shared_ptr<void> fork_ = alloc::lock_around_fork(mutex_, alloc::fork_rank::bridge);
  std::map<int, usage> usage_;   // by device
  // Host blocks with streams in flight (Note [Host blocks in flight]), and how many: frees of host
  // blocks read the count only, without mutex_, while it is 0.
  struct host_use {
    int device = -1;
    std::vector<void*> streams;
  };
  std::unordered_map<void*, host_use> host_uses_;
  std::atomic<std::size_t> host_uses_count_{0};
  // In a forked child the streams are the parent's, and so are the pages their transfers read:
  // the child's block (a copy) is free at once (Note [Fork] in fork_safety.hpp).
  alloc::creating_process process_;
  usage total_;                  // every device together (peaks of the sum)
  // One entry per block PyTorch holds (Note [Address map]), with room for live_reserve blocks
  // from the start so that the first thousands of mallocs do not grow it (growing moves every
  // entry under the lock).
  static constexpr std::size_t live_reserve = 8192;
  detail::address_map<live_block> live_{live_reserve};
  // Records `p` as live; mutex_ held.
  void remember(void* p, live_block l);
  struct sole_stream {  // Note [A device's sole stream]; guarded by mutex_
    bool known = false;  // `stream` allocated first
    bool ended = false;  // another stream allocated since: frees wait in the cache
    void* stream = nullptr;
  };
  // The candidate devices (sole_candidate) that have allocated.
  std::map<int, sole_stream> sole_;
  int trims_ = 0;  // bridge::trim calls running; guarded by mutex_
  // Per GPU: 0 not asked yet, 1 a candidate, 2 not; empty without events or with max_cached.
  std::vector<std::atomic<signed char>> sole_kinds_;
  std::unordered_map<const void*, std::pair<std::size_t, int>> lent_;  // usable bytes, device
  // CPU tensors' live blocks (Note [Host path]): requested bytes by block, in the shard of the
  // block's address.
  struct alignas(64) host_shard {
    mutable detail::spin_lock lock;  // guards live
    std::shared_ptr<void> fork = alloc::lock_around_fork(lock, alloc::fork_rank::bridge);
    detail::address_map<std::size_t> live{256};
  };
  static constexpr unsigned host_shard_bits = 5;
  mutable std::array<host_shard, std::size_t{1} << host_shard_bits> host_shards_;
  host_shard& shard_of(const void* p) const;
  host_statistics host_stats_{small_pool_limit};
};

}  // namespace umem::torch_bridge
