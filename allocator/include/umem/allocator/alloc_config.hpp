// The allocator's options: one struct, one documented table of keys, one parser for the
// UMEM_ALLOC_CONF string ("key:value,key:value", PyTorch's PYTORCH_CUDA_ALLOC_CONF style).
//
// Note [How UMEM_ALLOC_CONF is split]
// Items are separated by ',' and each item is split on its FIRST ':' only, so values may contain
// ':' (policy:node:1, policy:device:0). Interleave sets contain ',' (policy:interleave:0,2), so an
// item without ':' that directly follows a `policy` item continues the policy value; anywhere
// else it is an error. Empty items (a trailing comma) are ignored. Keys are case-sensitive,
// a key may appear once, and every error is umem::error(invalid_argument) whose message starts
// with "UMEM_ALLOC_CONF: ", names the key and lists what is accepted.
//
// Note [Sizes and fractions]
// A size is a decimal number with a binary unit: B, KiB, MiB, GiB, TiB (case-insensitive, e.g.
// 64GiB, 1.5 TiB, 4096B). A bare number is a fraction 0 < f <= 1 of the node's (limit.nodeN) or
// the machine's (limit.total) memory; a bare number is never bytes, so "1" cannot mean both one
// byte and all memory. Decimal units (GB) are rejected rather than guessed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "umem/allocator/placement.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc {

// A memory cap: exact bytes, or a fraction of what the node (or the machine) has.
struct memory_limit {
  std::uint64_t bytes = 0;          // used when fraction is nullopt; > 0
  std::optional<double> fraction;   // 0 < f <= 1
  bool operator==(const memory_limit&) const = default;
};

struct alloc_options {
  placement policy;                          // local
  spill_policy spill = spill_policy::never;
  coherence kind = coherence::fine;          // fine, coarse or extended_fine
  // device:D placements of host memory (unified GPUs: PyTorch's device tensors on an APU)
  coherence device_kind = coherence::coarse;
  bool huge_pages = true;                    // MADV_HUGEPAGE on fresh segments
  populate_mode populate = populate_mode::none;
  std::optional<memory_limit> limit_total;   // nullopt: no limit
  std::map<int, memory_limit> limit_node;    // by OS NUMA node index; absent: no limit
  // By GPU index (device:D): a discrete GPU's own memory (Note [Device placements] in
  // allocator.hpp); absent: no limit.
  std::map<int, memory_limit> limit_device;
  std::uint64_t max_cached = 0;              // bytes kept cached beyond use; 0 = unlimited
  bool expandable_segments = true;           // large misses grow one segment in place
  std::uint64_t thread_cache = std::uint64_t{64} << 20;  // per thread and pool; 0 = none
  // Smallest memory umem did not allocate that a zero-copy alias pins for the GPU (smaller: copied)
  std::uint64_t foreign_alias_min = std::uint64_t{4} << 20;
  bool operator==(const alloc_options&) const = default;
};

// One row of the documentation table. `key` "limit.node<N>" stands for limit.node0, limit.node1...
// (and "limit.device<D>" for limit.device0, ...).
struct alloc_option_doc {
  std::string_view key;
  std::string_view type;           // the accepted values, e.g. "never|warn|allow", "size"
  std::string_view default_value;  // as describe() prints it for alloc_options{}
  std::string_view doc;
};

// Every key, in documentation order.
std::span<const alloc_option_doc> alloc_option_table();

// `text` applied on top of `base`: keys present override, limit.nodeN entries merge ("none"
// removes one). An empty (or all-blank) text returns `base`. Throws umem::error(invalid_argument).
alloc_options parse_alloc_conf(std::string_view text, alloc_options base = {});

// parse_alloc_conf of UMEM_ALLOC_CONF (read through umem::env_value); defaults when unset.
alloc_options options_from_environment();

// Every effective value as a UMEM_ALLOC_CONF string, in table order, e.g.
// "policy:local,spill:never,kind:fine,huge_pages:true,populate:none,limit.total:none,max_cached:0,
// expandable_segments:true,thread_cache:64MiB,foreign_alias_min:4MiB"
// with one limit.nodeN item per node limit. parse_alloc_conf(describe(o)) == o.
std::string describe(const alloc_options& options);

// Limits in bytes for one machine: fractions resolved against numa_node::memory_total_bytes
// (limit.total: against the sum over all nodes; fractions round down).
struct resolved_limits {
  std::optional<std::uint64_t> total_bytes;
  std::map<int, std::uint64_t> node_bytes;  // only the nodes that have a limit
  bool operator==(const resolved_limits&) const = default;
};

// `l` in bytes: its size, or its fraction of `memory` (rounded down).
std::uint64_t limit_bytes_of(const memory_limit& l, std::uint64_t memory);

// Throws umem::error(invalid_argument) for a limit.nodeN whose node N is not in `numa`, and for a
// fraction whose memory size is unknown (no nodes, or a node reporting 0 bytes).
resolved_limits resolve_limits(const alloc_options& options, const numa_topology& numa);

}  // namespace umem::alloc
