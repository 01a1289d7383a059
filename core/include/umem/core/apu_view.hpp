// The per-socket view of a topology: which CPU agents, GPU agents and memory belong together.
//
// Note [Socket assembly]
// An MI300A socket is one NUMA node holding CPU cores, a GPU and HBM. The model keeps the three
// apart (numa.nodes, agents, gpu_numa); this view joins them:
//  * CPU agents: KFD numbers CPU nodes 0..n-1 over the NUMA nodes that have CPUs, in ascending
//    NUMA order (docs/rocm-runtime.md §4), so the i-th CPU agent (by KFD node) belongs to the i-th
//    NUMA node with CPUs. Without NUMA data the mapping is the identity libhsakmt assumes.
//  * GPU agents: only through topo.gpu_numa; a GPU without a NUMA binding is never guessed onto a
//    socket but collected in a final entry with numa_node -1.
//  * Capacities: the pools of one agent are views of the same memory, so an agent counts with its
//    largest pool only; partitions of one socket's GPU (TPX/CPX) are separate agents whose shares
//    add up.
// The view holds pointers into `topo`: it is valid as long as that topology is alive and unchanged.
#pragma once

#include <cstdint>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem {

struct apu_socket {
  int numa_node = -1;                     // -1: agents with no known NUMA node
  const umem::numa_node* numa = nullptr;  // null when the model has no data for this node
  std::vector<const agent*> cpu_agents;   // CPU agents on this node, ascending KFD node
  std::vector<const agent*> gpu_agents;   // GPUs bound to this node by topo.gpu_numa, HSA order
  std::uint64_t socket_memory_bytes = 0;  // NUMA node memory, else the CPU agents' largest GLOBAL pool
  std::uint64_t gpu_allocatable_bytes = 0;  // sum over gpu_agents of largest_allocatable_global_pool
};

// One entry per NUMA node known to the model (numa.nodes, CPU agents, GPU bindings), ascending;
// then, only if some agent could not be placed, one entry with numa_node -1.
std::vector<apu_socket> apu_sockets(const topology& topo);

// Size of the agent's largest allocatable GLOBAL pool; 0 if it has none.
std::uint64_t largest_allocatable_global_pool(const agent& a);

}  // namespace umem
