// NUMA nodes read from /sys/devices/system/node (and the CPUs' package ids) through an fs_root:
// the replay backend of a gathered node (`umtopo --from-gather`), which has no hwloc to ask.
//
// It means what load_hwloc_live() means, so a replay reports what the live node reported:
// - a node's CPUs are its cpulist (memory-only nodes have none, Note [Which CPUs a NUMA node
//   owns] in hwloc_source.hpp);
// - memory_total_bytes is MemTotal of the node's meminfo minus its huge page pools, which hwloc
//   counts apart from a node's normal memory; memory_free_bytes is MemFree (libnuma's source);
// - package is the physical_package_id shared by all the node's CPUs, unset when they differ;
// - distances are the nodes' distance rows; {{10}} for one node without any; empty otherwise.
#pragma once

#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::numa {

// Empty when the tree has no /sys/devices/system/node. Throws umem::error(parse_error) naming
// the file and the text for a file that is not what the kernel writes there.
umem::numa_topology read_sysfs_numa(const umem::fs_root& root);

}  // namespace umem::numa
