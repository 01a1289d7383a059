// A NUMA node's memory counters (/sys/devices/system/node/node<N>/meminfo), read through an
// fs_root, and what a strictly bound allocation can still get there.
//
// Note [The real end of a node]
// Memory bound to one node with MPOL_BIND never fails with ENOMEM when the node runs out: the
// kernel's page allocator runs the OOM killer for the policy-constrained request first (Linux 6.1
// in umem's 4-node VM: mmap + mbind + MADV_POPULATE_WRITE filled 705 of 768 MiB, then SIGKILL;
// docs/log/2026-12-01-reliability-figures.md). Under MPOL_PREFERRED the kernel falls back to
// other nodes itself. So a bound allocation has to be refused before the pages are asked for,
// while the node still has memory: node_obtainable_bytes() is what the node can give without the
// OOM killer, estimated like the kernel's MemAvailable but per node: MemFree, plus half of the
// node's file pages (clean page cache is reclaimed before anything is killed; half, because some
// of it is dirty or in use), plus the system's free swap (anonymous pages can be swapped out
// instead), less a reserve of max(32 MiB, MemTotal / 512) that the kernel keeps for itself (its
// min watermark).
// An estimate: a competing process can take the memory between the check and the fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "umem/core/fs_root.hpp"

namespace umem::numa {

// Bytes of `field` ("MemTotal", "MemFree", "Active(file)", ...) of node `node`'s meminfo; nullopt
// when the node or the field does not exist. Throws umem::error(parse_error) naming the file for
// a line that is not "<field>: <n> kB".
std::optional<std::uint64_t> node_meminfo_bytes(const fs_root& root, int node,
                                                std::string_view field);

// What a strictly bound allocation on `node` can still get before the kernel's OOM killer runs
// (Note [The real end of a node]); nullopt when the node has no meminfo (then nothing is known).
std::optional<std::uint64_t> node_obtainable_bytes(const fs_root& root, int node);

}  // namespace umem::numa
