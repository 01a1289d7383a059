// Where memory goes: the user-facing placement and spill policies, and the concrete node binding
// they resolve to for one request.
#pragma once

#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::alloc {

// `local` (the calling thread's node), `node:N`, `device:D` (NUMA node of GPU D, in the order of
// topology::gpus()), `interleave:SET` (e.g. interleave:0-3 or interleave:0,2; interleave:all).
enum class placement_kind { local, node, device, interleave };

struct placement {
  placement_kind kind = placement_kind::local;
  int index = -1;          // N for node:N, D for device:D
  std::vector<int> nodes;  // for interleave; empty means all nodes
  bool operator==(const placement&) const = default;
};

// What to do when the chosen node is exhausted or over its limit.
//  never: fail with a clear error (default; GPU-bound memory must not silently go remote)
//  warn:  take the nearest other node by distance, log a warning, count it as a spill
//  allow: like warn, without the warning
enum class spill_policy { never, warn, allow };

// How fresh segments are backed before first use.
//  none: lazily on first touch (by whoever touches first: the kernel then follows the mbind policy)
//  touch: touched at allocation time so the GPU never faults page by page
//  map_populate: MAP_POPULATE at mmap time
enum class populate_mode { none, touch, map_populate };

// A resolved binding for one segment: the mbind mode and node set.
enum class bind_mode { bind, preferred, interleave };
struct node_binding {
  bind_mode mode = bind_mode::bind;
  std::vector<int> nodes;  // OS NUMA node indices, ascending
  bool operator==(const node_binding&) const = default;
};

// "bind" | "preferred" | "interleave".
const char* to_string(bind_mode m);
// "none" | "touch" | "map_populate".
const char* to_string(populate_mode m);

// A node set in the canonical text form ("0-3", "0,2", "0-2,5"); "" when empty.
std::string format_node_set(const std::vector<int>& nodes);

}  // namespace umem::alloc
