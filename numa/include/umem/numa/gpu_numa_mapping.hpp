// Which NUMA node each GPU agent is local to, and how that was decided.
//
// Note [GPU to NUMA methods, in order of trust]
// 1. "rocr-nearest-cpu": the agent's NEAREST_CPU (ROCr >= 6.1) names a KFD CPU node.
// 2. "kfd-io-link": the GPU's KFD io_link to a CPU node with the lowest weight (what ROCr
//    itself uses to compute NEAREST_CPU).
// 3. "pci-sysfs": /sys/bus/pci/devices/<domain:bus:dev.fn>/numa_node, or, when that says -1,
//    a local_cpus mask equal to exactly one NUMA node's CPUs.
// 4. "kfd-order": an assumption, used only when every GPU is an APU (is_apu, or chip id 0x74A0)
//    and there is exactly one GPU agent per CPU agent: GPU i sits on CPU agent i's socket.
// Otherwise numa_node is nullopt, method "none", and the evidence says why each method failed.
//
// KFD CPU node i is the i-th NUMA node (ascending os_index) that has CPUs: KFD skips CPU-less
// NUMA nodes when it numbers its CPU nodes (docs/rocm-runtime.md §4). With no NUMA nodes in the
// topology the identity is assumed and the evidence says so.
#pragma once

#include <vector>

#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::numa {

// One binding per GPU agent of `topo`, in agent order. `pci_root` (may be null: method 3 is then
// skipped) is where PCI sysfs is read; it may be a captured tree.
std::vector<umem::gpu_numa_binding> map_gpus_to_numa(const umem::topology& topo,
                                                     const umem::fs_root* pci_root);

}  // namespace umem::numa
