#include "umem/importers/numactl_importer.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "text_scan.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

// Note [numactl --hardware layout]
//   available: 4 nodes (0-3)          node count and the node ids as a range list
//   node 0 cpus: 0 1 2 ... 119        per node, in id order: cpus (may be empty), size, free
//   node 0 size: 128193 MB            MiB (numactl prints bytes >> 20), or "<not available>"
//   node 0 free: 126397 MB
//   node distances:                   or "No distance information available."
//   node   0   1   2   3              header naming the columns
//     0:  10  32  32  32              one row per node
// The distances are the kernel's, which accepts an ACPI SLIT only if every diagonal entry is 10
// and every other entry is above 10 (drivers/acpi/numa/srat.c, slit_valid), so anything else in
// a dump means it was edited or is not numactl output.

namespace umem::importers {
namespace {

using detail::quote;
using detail::text_line;
using detail::trim;

constexpr std::uint32_t local_distance = 10;
constexpr std::uint32_t max_distance = 255;

enum class stage { header, nodes, distance_columns, distance_rows, done };

struct node_draft {
  numa_node node;
  std::optional<int> cpus_line, size_line, free_line;
};

class numactl_parser {
 public:
  explicit numactl_parser(const std::string& origin) : origin_(origin) {}

  numactl_import run(std::string_view text) {
    if (detail::is_blank(text))
      throw_error(errc::parse_error,
                  origin_ + ": empty input; expected the text printed by `numactl --hardware`");
    const auto lines = detail::split_lines(text);
    detail::require_utf8(lines, origin_);
    for (const auto& l : lines) line(l);
    finish();
    log().debug("numactl import {}: {} nodes, {} unrecognized lines", origin_,
                out_.numa.nodes.size(), out_.unrecognized.size());
    return std::move(out_);
  }

 private:
  void line(const text_line& l) {
    const std::string_view body = trim(l.text);
    if (body.empty()) return;
    if (body.starts_with("No NUMA"))
      detail::fail_at(origin_, l.number,
                      "numactl reports no NUMA support (" + quote(body) +
                          "); there is no NUMA topology to import");
    switch (stage_) {
      case stage::header: return header_line(l, body);
      case stage::nodes: return node_line(l, body);
      case stage::distance_columns: return distance_columns(l, body);
      case stage::distance_rows: return distance_row(l, body);
      case stage::done:
        if (is_distance_row(body))
          fail(l, "distance row beyond the " + std::to_string(nodes_.size()) +
                      " nodes; the matrix is not square");
        return unrecognized(l, "text after the distance matrix");
    }
  }

  void header_line(const text_line& l, std::string_view body) {
    if (body.starts_with("available:")) return available(l, body);
    // Capture annotations ("# Source: ...") and the shell prompt that ran numactl.
    if (body.starts_with('#') || body.find("numactl") != std::string_view::npos) return;
    unrecognized(l, "text before the 'available:' line");
  }

  // "available: 4 nodes (0-3)"; the list may be "(0-1,3)" when node ids have gaps.
  void available(const text_line& l, std::string_view body) {
    const auto words = detail::split_words(body.substr(std::string_view("available:").size()));
    auto count = words.size() == 3 ? detail::parse_u32(words[0]) : std::nullopt;
    const std::string_view list = words.size() == 3 ? words[2] : std::string_view{};
    if (!count || (words[1] != "nodes" && words[1] != "node") || list.size() < 2 ||
        list.front() != '(' || list.back() != ')')
      fail(l, "expected 'available: <N> nodes (<id list>)', found " + quote(body));
    std::set<int> ids;
    std::string_view rest = list.substr(1, list.size() - 2);
    while (true) {
      const std::size_t comma = std::min(rest.find(','), rest.size());
      const std::string_view item = rest.substr(0, comma);
      const std::size_t dash = item.find('-');
      auto first = detail::parse_u32(item.substr(0, dash));
      auto last = dash == std::string_view::npos ? first : detail::parse_u32(item.substr(dash + 1));
      constexpr std::uint32_t max_nodes = 1024;  // Linux MAX_NUMNODES (1 << NODES_SHIFT) at most
      if (!first || !last || *first > *last || *last >= max_nodes)
        fail(l, "expected a node id list like '0-3' or '0-1,3', found " + quote(list));
      for (std::uint32_t id = *first; id <= *last; ++id) ids.insert(static_cast<int>(id));
      if (comma == rest.size()) break;
      rest.remove_prefix(comma + 1);
    }
    if (ids.size() != *count)
      fail(l, "'available:' says " + std::to_string(*count) + " nodes but lists " +
                  std::to_string(ids.size()) + " node ids " + quote(list));
    for (int id : ids) {
      nodes_[id].node.os_index = id;
    }
    available_line_ = l.number;
    stage_ = stage::nodes;
  }

  void node_line(const text_line& l, std::string_view body) {
    if (body == "node distances:") {
      stage_ = stage::distance_columns;
      distances_line_ = l.number;
      return;
    }
    if (body == "No distance information available.") {
      stage_ = stage::done;
      return;
    }
    // "node <id> <key>: <value>"
    const auto words = detail::split_words(body);
    if (words.size() < 3 || words[0] != "node" || !words[2].ends_with(':'))
      return unrecognized(l, "expected 'node <id> cpus|size|free: ...'");
    const std::string_view key = words[2].substr(0, words[2].size() - 1);
    if (key != "cpus" && key != "size" && key != "free")
      return unrecognized(l, "unknown node attribute " + quote(key));
    auto id = detail::parse_u32(words[1]);
    if (!id || *id > static_cast<std::uint32_t>(std::numeric_limits<int>::max()) ||
        !nodes_.contains(static_cast<int>(*id)))
      fail(l, "node " + quote(words[1]) + " is not among the nodes of the 'available:' line " +
                  std::to_string(available_line_));
    node_draft& d = nodes_[static_cast<int>(*id)];
    const std::vector<std::string_view> values(words.begin() + 3, words.end());
    if (key == "cpus") {
      once(l, d.cpus_line, "cpus", *id);
      cpus(l, values, d.node);
    } else if (key == "size") {
      once(l, d.size_line, "size", *id);
      auto bytes = megabytes(l, values, "size");
      if (!bytes) fail(l, "numactl could not read the size of node " + std::to_string(*id));
      d.node.memory_total_bytes = *bytes;
    } else {
      once(l, d.free_line, "free", *id);
      d.node.memory_free_bytes = megabytes(l, values, "free");
    }
  }

  void once(const text_line& l, std::optional<int>& seen, std::string_view key, std::uint32_t id) {
    if (seen)
      fail(l, "second 'node " + std::to_string(id) + " " + std::string(key) +
                  ":' line (first on line " + std::to_string(*seen) + ")");
    seen = l.number;
  }

  void cpus(const text_line& l, const std::vector<std::string_view>& values, numa_node& node) {
    for (auto v : values) {
      auto cpu = detail::parse_u32(v);
      if (!cpu) fail(l, "expected decimal CPU numbers, found " + quote(v));
      if (!node.cpus.empty() && *cpu <= node.cpus.back())
        fail(l, "CPU numbers are not ascending at " + quote(v));
      if (auto [it, fresh] = cpu_owner_.emplace(*cpu, node.os_index); !fresh)
        fail(l, "CPU " + std::to_string(*cpu) + " is already listed for node " +
                    std::to_string(it->second));
      node.cpus.push_back(*cpu);
    }
  }

  // "128193 MB" -> bytes; nullopt for numactl's "<not available>".
  std::optional<std::uint64_t> megabytes(const text_line& l,
                                         const std::vector<std::string_view>& values,
                                         std::string_view key) {
    if (values.size() == 2 && values[0] == "<not" && values[1] == "available>") return std::nullopt;
    auto mb = values.size() == 2 && values[1] == "MB" ? detail::parse_u64(values[0]) : std::nullopt;
    if (!mb || *mb > (std::numeric_limits<std::uint64_t>::max() >> 20))
      fail(l, "'" + std::string(key) + ":' expects '<decimal> MB', found " +
                  quote(values.empty() ? std::string_view{} : values[0]));
    return *mb << 20;
  }

  void distance_columns(const text_line& l, std::string_view body) {
    const auto words = detail::split_words(body);
    if (words.empty() || words[0] != "node")
      fail(l, "expected the distance header 'node <id> <id> ...', found " + quote(body));
    std::vector<int> columns;
    for (std::size_t i = 1; i < words.size(); ++i) {
      auto id = detail::parse_u32(words[i]);
      if (!id || *id > static_cast<std::uint32_t>(std::numeric_limits<int>::max()))
        fail(l, "expected a node id in the distance header, found " + quote(words[i]));
      columns.push_back(static_cast<int>(*id));
    }
    if (columns != node_ids())
      fail(l, "the distance header names nodes " + quote(umem::detail::join(columns, " ")) +
                  " but the 'available:' line lists " + quote(umem::detail::join(node_ids(), " ")));
    stage_ = stage::distance_rows;
  }

  static bool is_distance_row(std::string_view body) {
    const auto words = detail::split_words(body);
    return !words.empty() && words[0].size() > 1 && words[0].back() == ':' &&
           detail::parse_u32(words[0].substr(0, words[0].size() - 1)).has_value();
  }

  void distance_row(const text_line& l, std::string_view body) {
    const auto ids = node_ids();
    const std::size_t row = out_.numa.distances.size();
    const auto words = detail::split_words(body);
    const std::string expected_label = std::to_string(ids[row]) + ":";
    if (words.empty() || words[0] != expected_label)
      fail(l, "expected distance row " + quote(expected_label) + " (row " +
                  std::to_string(row + 1) + " of " + std::to_string(ids.size()) + "), found " +
                  quote(body));
    if (words.size() - 1 != ids.size())
      fail(l, "distance row has " + std::to_string(words.size() - 1) + " values for " +
                  std::to_string(ids.size()) + " nodes; the matrix is not square");
    std::vector<std::uint32_t> values;
    for (std::size_t col = 0; col < ids.size(); ++col) {
      auto d = detail::parse_u32(words[col + 1]);
      if (!d || *d > max_distance)
        fail(l, "expected a distance 10..255, found " + quote(words[col + 1]));
      if (col == row && *d != local_distance)
        fail(l, "distance of node " + std::to_string(ids[row]) + " to itself is " +
                    std::to_string(*d) + ", expected 10");
      if (col != row && *d <= local_distance)
        fail(l, "distance between nodes " + std::to_string(ids[row]) + " and " +
                    std::to_string(ids[col]) + " is " + std::to_string(*d) +
                    ", expected more than 10");
      values.push_back(*d);
    }
    out_.numa.distances.push_back(std::move(values));
    if (out_.numa.distances.size() == ids.size()) stage_ = stage::done;
  }

  void finish() {
    if (stage_ == stage::header)
      throw_error(errc::parse_error,
                  origin_ +
                      ": no 'available: <N> nodes (...)' line; expected the text printed "
                      "by `numactl --hardware`");
    if (stage_ == stage::distance_columns || stage_ == stage::distance_rows)
      fail_line(distances_line_,
                "the distance matrix has " + std::to_string(out_.numa.distances.size()) +
                    " rows for " + std::to_string(nodes_.size()) + " nodes (is the capture cut?)");
    for (auto& [id, d] : nodes_) {
      if (!d.cpus_line || !d.size_line)
        fail_line(available_line_, "node " + std::to_string(id) + " has no '" +
                                       (d.cpus_line ? "size" : "cpus") +
                                       ":' line (is the capture cut?)");
      out_.numa.nodes.push_back(std::move(d.node));
    }
  }

  std::vector<int> node_ids() const {
    std::vector<int> ids;
    for (const auto& entry : nodes_) ids.push_back(entry.first);
    return ids;
  }

  void unrecognized(const text_line& l, std::string message) {
    out_.unrecognized.push_back({l.number, std::string(l.text), std::move(message)});
  }

  [[noreturn]] void fail(const text_line& l, const std::string& message) const {
    detail::fail_at(origin_, l.number, message);
  }
  [[noreturn]] void fail_line(int line, const std::string& message) const {
    detail::fail_at(origin_, line, message);
  }

  const std::string& origin_;
  stage stage_ = stage::header;
  std::map<int, node_draft> nodes_;  // ascending id
  std::map<std::uint32_t, int> cpu_owner_;
  int available_line_ = 0;
  int distances_line_ = 0;
  numactl_import out_;
};

}  // namespace

numactl_import import_numactl(std::string_view text, const std::string& origin) {
  return numactl_parser(origin).run(text);
}

}  // namespace umem::importers
