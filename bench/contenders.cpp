#include "contenders.hpp"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "umem/allocator/alloc_config.hpp"

namespace umem::bench {

void* malloc_contender::allocate(std::size_t n) { return std::malloc(n); }
void malloc_contender::deallocate(void* p, std::size_t) { std::free(p); }

void* numa_contender::allocate(std::size_t n) { return numa_alloc_onnode(n, node); }
void numa_contender::deallocate(void* p, std::size_t n) { numa_free(p, n); }

void* hwloc_contender::allocate(std::size_t n) {
  return hwloc_alloc_membind(topology, n, nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
}
void hwloc_contender::deallocate(void* p, std::size_t n) { hwloc_free(topology, p, n); }

void* mmap_mbind_contender::allocate(std::size_t n) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  constexpr std::size_t bits = 8 * sizeof(unsigned long);
  std::vector<unsigned long> mask(static_cast<std::size_t>(node) / bits + 1);
  mask[static_cast<std::size_t>(node) / bits] |= 1UL << (static_cast<std::size_t>(node) % bits);
  if (mbind(p, n, MPOL_BIND, mask.data(), mask.size() * bits, 0) != 0) {
    munmap(p, n);
    return nullptr;
  }
  return p;
}
void mmap_mbind_contender::deallocate(void* p, std::size_t n) { munmap(p, n); }

contender_set::contender_set(int node)
    : node_(node),
      allocator_(std::make_unique<alloc::allocator>(
          // UMEM_ALLOC_CONF applies (e.g. thread_cache:0 to compare), then the node.
          alloc::parse_alloc_conf("policy:node:" + std::to_string(node),
                                  alloc::options_from_environment()))),
      pool_(std::make_unique<alloc::caching_pool>(
          pool_source_, alloc::node_binding{alloc::bind_mode::bind, {node}}, coherence::fine)) {
  if (hwloc_topology_init(&topology_) != 0 || hwloc_topology_load(topology_) != 0)
    throw std::runtime_error("hwloc: cannot load this machine's topology");
  nodeset_ = hwloc_bitmap_alloc();
  hwloc_bitmap_only(nodeset_, static_cast<unsigned>(node));
  if (!hwloc_bitmap_isincluded(nodeset_, hwloc_topology_get_topology_nodeset(topology_)))
    throw std::runtime_error("hwloc: NUMA node " + std::to_string(node) + " does not exist");
}

contender_set::~contender_set() {
  hwloc_bitmap_free(nodeset_);
  hwloc_topology_destroy(topology_);
}

void contender_set::trim() {
  allocator_->trim();
  pool_->trim();
}

hwloc_contender contender_set::hwloc() const { return {topology_, nodeset_}; }

}  // namespace umem::bench
