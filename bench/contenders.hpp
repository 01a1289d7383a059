// The allocators under comparison, each behind the same two calls so that one benchmark loop
// (alloc_free_bench.hpp) measures them all. Every contender places memory on one NUMA node
// where it can (umem, numa_alloc_onnode, hwloc, mmap+mbind); malloc cannot be told a node and
// gets the kernel's default (local) policy, which is the same node on a one-node machine.
//
// Thread safety: allocate/deallocate may be called from any thread (the benchmarks run them on
// several). Ownership: contender_set owns the umem allocator, the pool and the hwloc topology;
// the contenders refer to them and must not outlive it.
#pragma once

#include <hwloc.h>

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>

#include "umem/allocator/allocator.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/source/host_numa_source.hpp"

namespace umem::bench {

// deallocate gets the size back: numa_free, hwloc_free and munmap need it.
template <class T>
concept contender = requires(T& c, void* p, std::size_t n) {
  { c.allocate(n) } -> std::same_as<void*>;
  { c.deallocate(p, n) } -> std::same_as<void>;
};

// umem's public allocator (UMEM_ALLOC_CONF "policy:node:N"): the path applications take.
struct umem_contender {
  alloc::allocator* a;
  void* allocate(std::size_t n) { return a->allocate(n); }
  void deallocate(void* p, std::size_t) { a->deallocate(p); }
};

// umem's caching_pool alone with thread caches off (pool_config's default): every call takes the
// pool's lock. Diagnostic only: it shows what the thread caches save.
struct umem_pool_contender {
  alloc::caching_pool* pool;
  void* allocate(std::size_t n) { return pool->allocate(n); }
  void deallocate(void* p, std::size_t) { pool->deallocate(p); }
};

// Whatever serves malloc() in this process (malloc_identity.hpp): glibc, jemalloc or mimalloc.
struct malloc_contender {
  void* allocate(std::size_t n);
  void deallocate(void* p, std::size_t n);
};

// libnuma: numa_alloc_onnode (mmap + mbind MPOL_BIND) and numa_free (munmap), no cache.
struct numa_contender {
  int node;
  void* allocate(std::size_t n);
  void deallocate(void* p, std::size_t n);
};

// hwloc_alloc_membind(BIND to the node's nodeset) and hwloc_free.
struct hwloc_contender {
  hwloc_topology_t topology;
  hwloc_const_nodeset_t nodeset;
  void* allocate(std::size_t n);
  void deallocate(void* p, std::size_t n);
};

// The system calls alone: mmap, mbind(MPOL_BIND) and munmap, no huge-page advice, no cache.
struct mmap_mbind_contender {
  int node;
  void* allocate(std::size_t n);
  void deallocate(void* p, std::size_t n);
};

// Everything the contenders of one process share, created once for NUMA node `node`.
// Throws std::runtime_error when hwloc cannot load the topology or does not know the node;
// umem::error from the umem allocator.
class contender_set {
 public:
  explicit contender_set(int node);
  ~contender_set();
  contender_set(const contender_set&) = delete;
  contender_set& operator=(const contender_set&) = delete;

  umem_contender umem() { return {allocator_.get()}; }
  umem_pool_contender umem_pool() { return {pool_.get()}; }
  numa_contender numa() const { return {node_}; }
  hwloc_contender hwloc() const;
  mmap_mbind_contender mmap_mbind() const { return {node_}; }
  // Returns what umem's allocator and pool cache to the OS (between benchmark runs).
  void trim();
  // The umem allocator's own description (sources, GPU mechanism, options).
  std::string umem_description() const { return allocator_->describe(); }

 private:
  int node_;
  std::unique_ptr<alloc::allocator> allocator_;
  alloc::host_numa_source pool_source_;
  std::unique_ptr<alloc::caching_pool> pool_;
  hwloc_topology_t topology_ = nullptr;
  hwloc_nodeset_t nodeset_ = nullptr;
};

}  // namespace umem::bench
