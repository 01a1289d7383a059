// From a user's placement and spill policy to the concrete node binding of one request, using
// only the topology model (numa nodes, distances, GPU->NUMA bindings). Also the text forms of
// placement, spill_policy and populate_mode that the configuration (UMEM_ALLOC_CONF) uses.
//
// Note [Spill is the pool's job, not the kernel's]
// A resolved placement always binds (MPOL_BIND) to its node, whatever the spill policy: if the
// kernel were allowed to fall back (MPOL_PREFERRED), a spill would happen silently and could be
// neither refused (`never`) nor counted (`warn`). Instead the resolver hands the pool the nodes
// to try next, nearest first (spill_order), and the pool re-binds explicitly when it spills.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "umem/allocator/placement.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc {

struct resolved_placement {
  node_binding binding;
  // Nodes to take, in order, when binding's node is exhausted or over its limit: spill_order of
  // that node for `warn` and `allow`; empty for `never` and for interleave (which already spans
  // its set).
  std::vector<int> spill_nodes;
  bool operator==(const resolved_placement&) const = default;
};

// Resolves `p` against `topo`. `local` means the NUMA node of the CPU the calling thread runs on
// now. Throws umem::error(invalid_argument) naming the placement and what exists: an unknown
// node ("the topology has nodes 0-3"), a device index out of range, a GPU without a NUMA node
// (quoting the binding's method and evidence), or a topology without NUMA nodes.
resolved_placement resolve_placement(const placement& p, spill_policy spill,
                                     const umem::topology& topo);
// The same with the calling thread's node given (what `local` resolves to); for tests and for
// callers that already know it.
resolved_placement resolve_placement(const placement& p, spill_policy spill,
                                     const umem::topology& topo, int calling_node);

// The other nodes of `numa`, nearest first by distances from `node`, ties by ascending os_index
// (all ties when the distance matrix is unknown). Throws invalid_argument for an unknown node.
std::vector<int> spill_order(int node, const umem::numa_topology& numa);

// Text forms: "local", "node:2", "device:0", "interleave:0-3", "interleave:0,2",
// "interleave:all" (any mix of N and A-B joined by commas). Parse errors throw
// umem::error(invalid_argument) quoting the text and saying what is expected, e.g.
// "placement 'node:x': N must be a non-negative integer". to_string gives the canonical form
// (ascending, ranges of 2+ consecutive nodes as A-B) that parses back to an equal value.
placement parse_placement(std::string_view text);
std::string to_string(const placement& p);

// "never" | "warn" | "allow".
spill_policy parse_spill_policy(std::string_view text);
const char* to_string(spill_policy s);

// "none" | "touch" | "map_populate".
populate_mode parse_populate_mode(std::string_view text);

}  // namespace umem::alloc
