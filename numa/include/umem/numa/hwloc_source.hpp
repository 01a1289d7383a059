// NUMA nodes as hwloc sees them: the live machine, or an hwloc v2 XML export of another one.
//
// Both return plain data (umem::numa_topology); neither binds nor allocates. A topology loaded
// from XML describes another machine and must never be used to place memory here.
//
// Note [Which CPUs a NUMA node owns]
// hwloc gives a CPU-less (memory-only: CXL, HBM exposed alone, PMEM) NUMA node the cpuset of
// its locality, so it looks as if it had the CPUs of the socket or machine it hangs from. umem's
// model means "the node's own CPUs" (what /sys/devices/system/node/nodeN/cpulist and
// `numactl --hardware` list, and what KFD counts when it numbers its CPU nodes). So each CPU is
// given to the node with the smallest cpuset that contains it, the lowest os_index on a tie
// (Linux numbers CPU nodes before memory-only ones); a node that wins no CPU has none.
#pragma once

#include <filesystem>

#include "umem/core/topology.hpp"

namespace umem::numa {

// This machine, through hwloc (all CPUs and nodes, including those the process's cgroup or
// affinity excludes). memory_free_bytes comes from libnuma when it can tell. Distances are the
// OS (ACPI SLIT) latency matrix; {{10}} on a one-node machine without one; empty (and logged)
// otherwise. Throws umem::error(runtime_error) naming the hwloc call that failed.
umem::numa_topology load_hwloc_live();

// The same from an hwloc v2 XML export. memory_free_bytes stays nullopt (an export does not
// carry it). Throws umem::error: not_found if `file` does not exist, parse_error if hwloc rejects
// it (the message names the path and hwloc's reason).
umem::numa_topology load_hwloc_xml(const std::filesystem::path& file);

}  // namespace umem::numa
