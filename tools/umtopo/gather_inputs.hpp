// The raw inputs of every discovery backend, read through the same fs_root the backends read
// them through (so a gather holds exactly what they would see):
// - KFD topology (hsa_runtime/kfd_topology.hpp): the whole topology tree, nodes with their
//   properties, mem_banks, io_links, p2p_links and caches;
// - kernel knobs (hsa_runtime/kernel_knobs.hpp): amdgpu, amdttm and ttm module parameters, THP,
//   numa_balancing, compaction, IOMMU units and groups, /proc/meminfo, /proc/cmdline;
// - NUMA (numa/sysfs_numa_source.hpp): /sys/devices/system/node and the CPUs' topology;
// - GPU to NUMA (numa/gpu_numa_mapping.hpp): each runtime GPU's PCI numa_node and local_cpus.
// Symbolic links inside those trees are not followed (sysfs links back up to the devices), and
// /sys/class/iommu's links become empty directories: their names are what the reader lists.
#pragma once

#include <string>
#include <vector>

#include "tar_gz.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::umtopo {

struct raw_inputs {
  std::vector<tar_entry> entries;       // names are the absolute paths without the leading '/'
  std::vector<std::string> absent;      // paths a backend reads that `root` does not have
  std::vector<std::string> unreadable;  // "path: why" for files the process could not read
};

// `runtime` names the GPUs whose PCI files are read (agents of the recorded runtime answers).
raw_inputs collect_raw_inputs(const fs_root& root, const topology& runtime);

}  // namespace umem::umtopo
