// umem's allocator: NUMA-placed, GPU-visible, cached memory for APU nodes.
//
// Note [Composition of the allocator]
//   caching_pool (one per node binding and coherence kind, created on first use)
//     -> limiting_source   (limit.total / limit.nodeN, enforced before the kernel runs out)
//     -> gpu_visible_source (the gpu_mapper: ROCr SVM or lock-to-pool, or host-only)
//     -> host_numa_source  (mmap + mbind + MADV_HUGEPAGE + optional population)
//   caching_pool (one per discrete GPU, created on first `device:D` request)
//     -> device_memory_source (the GPU's own memory, e.g. cuda_device_source)
// All of it is assembled in allocator.cpp and nowhere else.
//
// Note [Device placements]
// `device:D` on a unified GPU (an APU, or pageable memory access) is host memory on the GPU's
// NUMA node, like any other placement, but coarse-grained unless the request names a kind
// (alloc_options::device_kind: what hipMalloc gives; PyTorch's device tensors land here). On a
// discrete GPU (Note [Device memory kinds] in machine/gpu_memory_kind.hpp) whose runtime has a
// device memory source, it is served by that GPU's device pool instead: one pool per GPU whatever
// the coherence kind asked (device memory has one), with the configured thread cache, max_cached
// and expandable_segments (the last only matters for a source that can grow). Device memory
// never spills to host memory (the spill policy is for NUMA nodes: a discrete GPU reading host
// memory is the slowdown this avoids).
// limit.device<D> bounds the device pool's reserved bytes (a size, or a fraction of the GPU's
// memory as its source reports it when the pool is made) exactly as limit_bytes bounds any pool
// (Note [Running out] in caching_pool.hpp); limit.total and limit.node<N> stay host limits. A
// limit.device<D> for a GPU that is not in the topology, or that is unified (its device memory is
// its node's: limit.node<N>), is an error when the allocator is made. Device pointers are not
// host-accessible: residency() and the host must not touch them.
//
// Thread safety: every member function may be called from any thread. Pools have their own
// mutexes, so threads working on different nodes do not contend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/source/device_memory_source.hpp"
#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/allocator/reclaim_report.hpp"
#include "umem/allocator/residency.hpp"
#include "umem/allocator/source/segment.hpp"
#include "umem/core/topology.hpp"
#include "umem/machine/live_machine.hpp"

namespace umem::alloc {

class caching_pool;
struct resolved_placement;

// One pool as the torch bridge reports it per device: what it is bound to (or the GPU whose own
// memory it holds), its statistics and, when asked for, its segments.
struct pool_report {
  node_binding binding;
  coherence kind = coherence::fine;
  int device = -1;  // >= 0: a discrete GPU's own memory (Note [Device placements])
  pool_stats stats;
  pool_snapshot snapshot;  // empty unless pool_reports(true)
};

// Which memory a live allocation is (Note [Device placements]).
enum class memory_kind { host, device };

// The device memory source of GPU `device` (an index of topology::gpus()), or null when
// `device:D` stays host memory. Called at most once per GPU, on its first device request, with
// the allocator's pool lock held (it must not call back into the allocator).
using device_source_factory = std::function<std::unique_ptr<device_memory_source>(int device)>;

// Per-request overrides of the configured placement and coherence.
struct request {
  std::optional<placement> where;
  std::optional<coherence> kind;
  // A segment of its own, never carved from the cache and returned to the system when freed
  // (caching_pool.hpp, Note [Own segments]): for callers that cache memory themselves.
  bool own_segment = false;
  // The most bytes this request may add to the reserved bytes of the pool that serves it
  // (caching_pool.hpp, Note [Headroom]): for callers with a budget of their own. Asked before
  // every attempt of the reclaim ladder, with no allocator lock held, since its rungs give memory
  // back; empty: no bound.
  std::function<std::size_t()> headroom{};
  // When set, what the reclaim ladder did for this request (retries, the rung that served it),
  // filled in whether it succeeds or throws.
  reclaim_report* report = nullptr;
};

// What the allocator's owner adds to the reclaim ladder (Note [Reclaim ladder] in
// reclaim_ladder.hpp). All are called from the thread whose request failed, with no allocator
// lock held; they may free memory of this allocator but must not allocate from it.
struct reclaim_hooks {
  // Rung 2: gives back blocks the owner holds whose streams finished (waiting for their events);
  // the bytes given back.
  std::function<std::size_t()> release_stream_blocks;
  // False while rungs 2 and 3 must not run: a CUDA graph capture (giving device memory back and
  // waiting for events synchronize). Empty: always allowed.
  std::function<bool()> may_reclaim;
  // Rung 3 where the owner must surround the trim (the torch bridge waits for streams first and
  // holds frees back while it runs); it calls trim(). Empty: trim() itself.
  std::function<std::size_t()> trim;
};

class allocator {
 public:
  // This machine: allocator(options, discover_live_machine()).
  explicit allocator(const alloc_options& options);
  // A discovered machine: host memory from host_numa_source (options.huge_pages, populate), GPU
  // visibility from make_gpu_mapper and discrete GPUs' memory from make_device_memory_source
  // (gpu_visibility.hpp) on m.runtime, so the runtime is the only way to the GPU (it is kept
  // alive as long as the allocator). Throws what make_gpu_mapper throws.
  allocator(const alloc_options& options, machine::live_machine m);
  // Explicit parts (tests, replays). `host` is the bottom source; `mapper` must keep whatever
  // runtime it uses loaded as long as it lives (make_gpu_mapper's do). Without
  // `device_sources` every `device:D` placement is host memory.
  allocator(const alloc_options& options, topology topo, std::unique_ptr<upstream_source> host,
            std::unique_ptr<gpu_mapper> mapper, device_source_factory device_sources = {});
  ~allocator();
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;

  // At least `bytes`, 256-byte aligned. Throws umem::error: invalid_argument (size 0, overflow,
  // unknown node or device), out_of_memory once the reclaim ladder is climbed (Note [Reclaim
  // ladder]: thread caches, the owner's stream blocks, trim, spill as the spill policy allows):
  // one error naming the request, the node, the limit or the upstream's reason and the
  // statistics; for a discrete GPU's memory, which never spills, what the device has left.
  // A `device:D` request on a discrete GPU ignores the coherence kind (Note [Device placements]).
  void* allocate(std::size_t bytes, const request& r);
  // The same with the default request: the common call, which builds no request object (the
  // caller of a defaulted `request` argument cleared its 96 bytes on every call).
  void* allocate(std::size_t bytes);
  // allocate(bytes)'s first step alone: a block from the calling thread's cache of the default
  // policy's pool (Note [Fast path] in caching_pool.hpp), or nullptr where allocate() would go on
  // to the pool's locked path and the reclaim ladder. For callers whose own slow path differs
  // (the torch bridge's CPU tensors count the ladder's retries). Throws only what finding the
  // default policy's pool the first time throws (as allocate()).
  void* allocate_cached(std::size_t bytes);
  // Throws umem::error(invalid_argument) for a pointer this allocator does not own or a double
  // free; nothing changes then. Null is a no-op.
  void deallocate(void* p);
  // Usable size of a live allocation (>= the requested size).
  std::size_t allocation_size(const void* p) const;
  // Whether `p` (inside a segment of this allocator) is host memory or a discrete GPU's memory.
  // Throws umem::error(invalid_argument) for a pointer this allocator does not own.
  memory_kind kind_of(const void* p) const;
  // {free, total} bytes of discrete GPU `device` (an index of topology::gpus()) as its runtime
  // reports them (cuMemGetInfo in its primary context); nullopt when `device:D` is host memory.
  // Creates the GPU's device pool if it has none yet. Throws umem::error: invalid_argument for an
  // unknown device; runtime_error when the runtime call fails.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> device_memory_info(int device) const;

  // Returns every fully free cached segment to the OS; the bytes released.
  std::size_t trim();
  // Registers the owner's part of the reclaim ladder (replacing any earlier hooks). Not
  // thread-safe: call it before other threads use the allocator (the torch bridge's constructor
  // does), so that the ladder reads the hooks without a lock (none to hold across fork()).
  void set_reclaim_hooks(reclaim_hooks hooks);

  // PyTorch memory_stats keys ("allocated_bytes.all.current", ...) for all pools together, and
  // per pool as "<metric>.node<N>_<kind>.<field>" (interleaved pools: "interleave<set>_<kind>";
  // discrete GPUs' device pools: "<metric>.device<D>.<field>", counted in the totals too).
  std::map<std::string, std::int64_t> memory_stats() const;
  std::string memory_stats_json() const;
  void reset_peak_stats();
  // Every segment and block of every pool (like torch.cuda.memory_snapshot), as JSON.
  std::string memory_snapshot_json() const;
  // Every pool, typed; with their segments when `with_segments`.
  std::vector<pool_report> pool_reports(bool with_segments) const;

  residency_report residency(const void* p, std::size_t bytes) const;
  bool gpu_accessible() const;
  // gpu_mapper::register_foreign of the allocator's mapper: memory umem did not allocate, made
  // usable by the GPU runtime's calls while the handle lives (null: nothing needed).
  std::shared_ptr<void> register_foreign(const void* p, std::size_t bytes) const;
  // gpu_mapper::pins_foreign: register_foreign makes memory the GPU cannot reach usable in place.
  bool pins_foreign() const;

  const topology& topo() const;
  const alloc_options& options() const;
  // Which sources, GPU mechanism and options are in effect, one per line.
  std::string describe() const;

 private:
  void assemble(const alloc_options& options, topology topo, std::unique_ptr<upstream_source> host,
                std::unique_ptr<gpu_mapper> mapper, device_source_factory device_sources);
  // allocate() once the pool is chosen: the reclaim ladder. `resolved` null: device memory, which
  // never spills.
  void* allocate_from(caching_pool& home, const resolved_placement* resolved, coherence kind,
                      std::size_t bytes, const request& r);

  struct impl;
  std::unique_ptr<impl> impl_;
};

// std::pmr adaptor: lets standard containers use umem memory with one placement/coherence.
// Alignments above 256 bytes are refused with umem::error(unsupported).
class pmr_resource final : public std::pmr::memory_resource {
 public:
  explicit pmr_resource(allocator& a, request r = {}) : alloc_(a), request_(std::move(r)) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override;

  allocator& alloc_;
  request request_;
};

}  // namespace umem::alloc
