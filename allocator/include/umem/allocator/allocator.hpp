// umem's allocator: NUMA-placed, GPU-visible, cached memory for APU nodes.
//
// Note [Composition of the allocator]
//   caching_pool (one per node binding and coherence kind, created on first use)
//     -> limiting_source   (limit.total / limit.nodeN, enforced before the kernel runs out)
//     -> gpu_visible_source (the gpu_mapper: ROCr SVM or lock-to-pool, or host-only)
//     -> host_numa_source  (mmap + mbind + MADV_HUGEPAGE + optional population)
// All of it is assembled in allocator.cpp and nowhere else.
//
// Thread safety: every member function may be called from any thread. Pools have their own
// mutexes, so threads working on different nodes do not contend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/gpu_mapper.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/allocator/residency.hpp"
#include "umem/allocator/segment.hpp"
#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {

class caching_pool;
struct resolved_placement;

// One pool as the torch bridge reports it per device: what it is bound to, its statistics and,
// when asked for, its segments.
struct pool_report {
  node_binding binding;
  coherence kind = coherence::fine;
  pool_stats stats;
  pool_snapshot snapshot;  // empty unless pool_reports(true)
};

// Per-request overrides of the configured placement and coherence.
struct request {
  std::optional<placement> where;
  std::optional<coherence> kind;
};

class allocator {
 public:
  // This machine: hwloc NUMA nodes, ROCr when present (kept loaded for the allocator's life).
  explicit allocator(const alloc_options& options);
  // Explicit parts (tests, replays). `host` is the bottom source. `rocr` may be null; when set it
  // must be the library `mapper` uses, and it is kept alive as long as the mapper.
  allocator(const alloc_options& options, topology topo, std::unique_ptr<upstream_source> host,
            std::unique_ptr<gpu_mapper> mapper,
            std::unique_ptr<hsa::rocr_library> rocr = nullptr);
  ~allocator();
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;

  // At least `bytes`, 256-byte aligned. Throws umem::error: invalid_argument (size 0, overflow,
  // unknown node or device), out_of_memory (after trimming the cache, retrying once and spilling
  // as the spill policy allows; the message names the node, the request and the statistics).
  void* allocate(std::size_t bytes, const request& r = {});
  // Throws umem::error(invalid_argument) for a pointer this allocator does not own or a double
  // free; nothing changes then. Null is a no-op.
  void deallocate(void* p);
  // Usable size of a live allocation (>= the requested size).
  std::size_t allocation_size(const void* p) const;

  // Returns every fully free cached segment to the OS; the bytes released.
  std::size_t trim();

  // PyTorch memory_stats keys ("allocated_bytes.all.current", ...) for all pools together, and
  // per pool as "<metric>.node<N>_<kind>.<field>" (interleaved pools: "interleave<set>_<kind>").
  std::map<std::string, std::int64_t> memory_stats() const;
  std::string memory_stats_json() const;
  void reset_peak_stats();
  // Every segment and block of every pool (like torch.cuda.memory_snapshot), as JSON.
  std::string memory_snapshot_json() const;
  // Every pool, typed; with their segments when `with_segments`.
  std::vector<pool_report> pool_reports(bool with_segments) const;

  residency_report residency(const void* p, std::size_t bytes) const;
  bool gpu_accessible() const;

  const topology& topo() const;
  const alloc_options& options() const;
  // Which sources, GPU mechanism and options are in effect, one per line.
  std::string describe() const;

 private:
  void assemble(const alloc_options& options, topology topo, std::unique_ptr<upstream_source> host,
                std::unique_ptr<gpu_mapper> mapper, std::unique_ptr<hsa::rocr_library> rocr);
  // allocate() once the pool is chosen: the cache-trimming retry and the spill policy.
  void* allocate_from(caching_pool& home, const resolved_placement& resolved,
                      coherence kind, std::size_t bytes);

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
