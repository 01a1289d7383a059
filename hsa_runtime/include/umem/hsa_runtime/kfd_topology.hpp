// The KFD sysfs topology (/sys/class/kfd/kfd/topology) read into umem::kfd_node, either from a
// live or captured tree through umem::fs_root, or from a text dump of the node properties files.
//
// Note [KFD topology layout]
// topology/generation_id changes whenever the kernel rebuilds the topology (GPU hot-plug,
// partition change). topology/nodes/N/ holds name, gpu_id (0 for CPU nodes), properties,
// mem_banks/M/properties and io_links/L/properties; every properties file is "key value" lines
// with an unsigned decimal value. A node is a GPU iff simd_count > 0.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::hsa {

// Where the kernel publishes the topology; the second is what the first links to, and is tried
// when a captured tree kept only one of them.
inline constexpr const char* kfd_topology_path = "/sys/class/kfd/kfd/topology";
inline constexpr const char* kfd_topology_fallback_path = "/sys/devices/virtual/kfd/kfd/topology";

struct kfd_scan_options {
  // Passes over the nodes before giving up on a topology whose generation_id keeps changing.
  int max_attempts = 5;
  // Test seam: called after each pass (0-based attempt), before generation_id is read again.
  std::function<void(int attempt)> after_pass;
};

// Nodes in ascending id order, or an empty vector when KFD is absent (normal on machines without
// an AMD GPU). Reads generation_id before and after each pass and rescans if it moved; throws
// umem::error(io_error) if it moved on every one of options.max_attempts passes. A present but
// malformed file throws umem::error(parse_error) naming the file and line. name and gpu_id stay
// empty/0 where a captured tree lacks those files; absent mem_banks/io_links give empty vectors.
std::vector<umem::kfd_node> read_kfd_topology(const umem::fs_root& root,
                                              const kfd_scan_options& options = {});

// Parses one properties text: non-blank lines of "key value", value an unsigned 64-bit decimal.
// Throws umem::error(parse_error) naming origin:line for any other line or a repeated key.
std::map<std::string, std::uint64_t> parse_kfd_properties(std::string_view text,
                                                          const std::string& origin);

// Turns the output of `cat /sys/class/kfd/kfd/topology/nodes/*/properties` into nodes.
// Accepted input:
//  - '#' lines (a capture's provenance header) and blank lines anywhere;
//  - optionally one command line naming topology/nodes/*/properties (or nodes/<N>/properties for
//    a single node): only what follows it is the dump; the other command output before it is
//    skipped (logged at debug with its line range);
//  - node blocks separated by lines of '-' characters, or, without separators, plain
//    concatenated files, where a node starts when the dump's first key appears again.
// Node ids follow the shell's glob order of nodes/* (0, 1, 10, 11, 2, ...), or <N> for a
// single-node command. The dump has no name or gpu_id files, so those stay empty/0, and no
// mem_banks or io_links. Any other line, a block lacking cpu_cores_count or simd_count, or an
// empty dump throws umem::error(parse_error) naming origin:line.
std::vector<umem::kfd_node> import_kfd_properties_dump(std::string_view text,
                                                       const std::string& origin);

}  // namespace umem::hsa
