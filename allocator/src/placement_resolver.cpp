#include "umem/allocator/placement_resolver.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "umem/allocator/source/os_memory.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

// Larger than any kernel's MAX_NUMNODES (1024 on x86-64), so a range cannot explode in memory.
constexpr int max_node_index = 4095;

[[noreturn]] void bad_placement(std::string_view text, const std::string& why) {
  throw_error(errc::invalid_argument, "placement '" + std::string(text) + "': " + why);
}

// A non-negative decimal integer filling all of `s`; nullopt otherwise (sign, space, overflow).
std::optional<int> parse_index(std::string_view s) {
  int v = 0;
  if (s.empty() || s.front() < '0' || s.front() > '9') return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::vector<int> parse_node_set(std::string_view text, std::string_view set) {
  if (set.empty())
    bad_placement(text, "SET is empty; write all, a list like 0,2 or a range like 0-3");
  if (set == "all") return {};
  std::vector<int> nodes;
  for (std::size_t start = 0;;) {
    const std::size_t comma = set.find(',', start);
    const std::string_view item =
        set.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) bad_placement(text, "empty item in the node set; write e.g. 0-3 or 0,2");
    const std::size_t dash = item.find('-');
    const auto first = parse_index(item.substr(0, dash));
    const auto last = dash == std::string_view::npos ? first : parse_index(item.substr(dash + 1));
    if (!first || !last)
      bad_placement(text, "'" + std::string(item) +
                              "' is not a node (N) or a range (A-B) of non-negative integers");
    if (*first > *last)
      bad_placement(text, "range " + std::string(item) + " is reversed; write " +
                              std::to_string(*last) + "-" + std::to_string(*first));
    if (*last > max_node_index)
      bad_placement(text, "node " + std::to_string(*last) + " is beyond any machine (at most " +
                              std::to_string(max_node_index) + ")");
    for (int n = *first; n <= *last; ++n) {
      if (std::find(nodes.begin(), nodes.end(), n) != nodes.end())
        bad_placement(text, "node " + std::to_string(n) + " is listed twice");
      nodes.push_back(n);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::vector<int> node_indices(const umem::numa_topology& numa) {
  std::vector<int> out;
  for (const auto& n : numa.nodes) out.push_back(n.os_index);
  return out;
}

// Throws "placement 'P': [<who>] NUMA node N [, which] does not exist; the topology has nodes
// S<hint>".
void require_node(const placement& p, int node, const umem::numa_topology& numa,
                  const std::string& who, const std::string& hint = "") {
  if (numa.nodes.empty())
    bad_placement(to_string(p), "the topology has no NUMA nodes; cannot place memory");
  for (const auto& n : numa.nodes)
    if (n.os_index == node) return;
  const std::string n = "NUMA node " + std::to_string(node);
  bad_placement(to_string(p), (who.empty() ? n + " does not exist" : who + " " + n +
                                                                        ", which does not exist") +
                                  "; the topology has nodes " +
                                  format_node_set(node_indices(numa)) + hint);
}

int device_node(const placement& p, const umem::topology& topo) {
  const auto gpus = topo.gpus();
  const std::string text = to_string(p);
  if (gpus.empty()) bad_placement(text, "the topology has no GPU");
  if (static_cast<std::size_t>(p.index) >= gpus.size())
    bad_placement(text, "the topology has " + std::to_string(gpus.size()) + " GPU(s): device:0" +
                            (gpus.size() > 1 ? "-" + std::to_string(gpus.size() - 1) : ""));
  const std::uint32_t kfd = gpus[static_cast<std::size_t>(p.index)]->kfd_node;
  const std::string gpu = "GPU " + std::to_string(p.index) + " (KFD node " + std::to_string(kfd) +
                          ")";
  const auto it = std::find_if(topo.gpu_numa.begin(), topo.gpu_numa.end(),
                               [&](const auto& b) { return b.gpu_kfd_node == kfd; });
  if (it == topo.gpu_numa.end())
    bad_placement(text, gpu + " has no GPU->NUMA binding in the topology; map GPUs to NUMA "
                              "nodes first (umem::numa::map_gpus_to_numa)");
  if (!it->numa_node)
    bad_placement(text, gpu + " is not local to any NUMA node (method " + it->method + ": " +
                            it->evidence + "); use node:N instead");
  require_node(p, *it->numa_node, topo.numa, gpu + " is bound (" + it->method + ") to");
  return *it->numa_node;
}

}  // namespace

resolved_placement resolve_placement(const placement& p, spill_policy spill,
                                     const umem::topology& topo) {
  return resolve_placement(p, spill, topo, p.kind == placement_kind::local ? os::current_node() : -1);
}

resolved_placement resolve_placement(const placement& p, spill_policy spill,
                                     const umem::topology& topo, int calling_node) {
  resolved_placement out;
  if (p.kind == placement_kind::interleave) {
    out.binding.mode = bind_mode::interleave;
    if (p.nodes.empty()) {
      if (topo.numa.nodes.empty())
        bad_placement(to_string(p), "the topology has no NUMA nodes; cannot place memory");
      out.binding.nodes = node_indices(topo.numa);
      std::sort(out.binding.nodes.begin(), out.binding.nodes.end());
    } else {
      for (int n : p.nodes) require_node(p, n, topo.numa, "the set names");
      out.binding.nodes = p.nodes;
    }
    return out;
  }
  int node = -1;
  switch (p.kind) {
    case placement_kind::local:
      node = calling_node;
      require_node(p, node, topo.numa, "the calling thread runs on",
                   " (is the topology another machine's?)");
      break;
    case placement_kind::node:
      node = p.index;
      require_node(p, node, topo.numa, "");
      break;
    case placement_kind::device: node = device_node(p, topo); break;
    case placement_kind::interleave: break;  // handled above
  }
  out.binding = {bind_mode::bind, {node}};
  if (spill != spill_policy::never) out.spill_nodes = spill_order(node, topo.numa);
  return out;
}

std::vector<int> spill_order(int node, const umem::numa_topology& numa) {
  const auto& nodes = numa.nodes;
  const auto self = std::find_if(nodes.begin(), nodes.end(),
                                 [&](const auto& n) { return n.os_index == node; });
  if (self == nodes.end())
    throw_error(errc::invalid_argument,
                "spill order: NUMA node " + std::to_string(node) +
                    " does not exist; the topology has nodes " +
                    format_node_set(node_indices(numa)));
  const auto from = static_cast<std::size_t>(self - nodes.begin());
  // A matrix that does not cover every node is treated as unknown: all distances tie.
  const bool known = numa.distances.size() == nodes.size() &&
                     std::all_of(numa.distances.begin(), numa.distances.end(),
                                 [&](const auto& row) { return row.size() == nodes.size(); });
  std::vector<std::pair<std::uint32_t, int>> others;  // (distance, os_index)
  for (std::size_t j = 0; j < nodes.size(); ++j)
    if (j != from) others.emplace_back(known ? numa.distances[from][j] : 0u, nodes[j].os_index);
  std::sort(others.begin(), others.end());
  std::vector<int> order;
  for (const auto& o : others) order.push_back(o.second);
  return order;
}

placement parse_placement(std::string_view text) {
  const std::size_t colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  const bool has_arg = colon != std::string_view::npos;
  const std::string_view arg = has_arg ? text.substr(colon + 1) : std::string_view{};
  placement p;
  if (kind == "local") {
    if (has_arg) bad_placement(text, "local takes no argument");
    return p;
  }
  if (kind == "node" || kind == "device") {
    const bool is_node = kind == "node";
    if (!has_arg)
      bad_placement(text, std::string(kind) + " needs an index, e.g. " + std::string(kind) + ":0");
    const auto index = parse_index(arg);
    if (!index)
      bad_placement(text, std::string(is_node ? "N" : "D") + " must be a non-negative integer");
    p.kind = is_node ? placement_kind::node : placement_kind::device;
    p.index = *index;
    return p;
  }
  if (kind == "interleave") {
    if (!has_arg) bad_placement(text, "interleave needs a node set, e.g. interleave:0-3 or interleave:all");
    p.kind = placement_kind::interleave;
    p.nodes = parse_node_set(text, arg);
    return p;
  }
  bad_placement(text, "unknown kind '" + std::string(kind) +
                          "'; expected local, node:N, device:D or interleave:SET");
}

std::string to_string(const placement& p) {
  switch (p.kind) {
    case placement_kind::local: return "local";
    case placement_kind::node: return "node:" + std::to_string(p.index);
    case placement_kind::device: return "device:" + std::to_string(p.index);
    case placement_kind::interleave:
      return "interleave:" + (p.nodes.empty() ? std::string("all") : format_node_set(p.nodes));
  }
  return "?";
}

spill_policy parse_spill_policy(std::string_view text) {
  if (text == "never") return spill_policy::never;
  if (text == "warn") return spill_policy::warn;
  if (text == "allow") return spill_policy::allow;
  throw_error(errc::invalid_argument,
              "spill policy '" + std::string(text) + "': expected never, warn or allow");
}

const char* to_string(spill_policy s) {
  switch (s) {
    case spill_policy::never: return "never";
    case spill_policy::warn: return "warn";
    case spill_policy::allow: return "allow";
  }
  return "?";
}

populate_mode parse_populate_mode(std::string_view text) {
  if (text == "none") return populate_mode::none;
  if (text == "touch") return populate_mode::touch;
  if (text == "map_populate") return populate_mode::map_populate;
  throw_error(errc::invalid_argument,
              "populate mode '" + std::string(text) + "': expected none, touch or map_populate");
}

}  // namespace umem::alloc
