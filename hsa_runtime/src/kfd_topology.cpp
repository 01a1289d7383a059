#include "umem/hsa_runtime/kfd_topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <limits>
#include <optional>

#include "umem/core/error.hpp"
#include "umem/core/log.hpp"

namespace umem::hsa {
namespace {

constexpr std::string_view blanks = " \t\r";

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(blanks);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(blanks) - first + 1);
}

struct numbered_line {
  std::size_t number = 0;  // 1-based
  std::string_view text;   // trimmed
};

std::vector<numbered_line> split_lines(std::string_view text) {
  std::vector<numbered_line> lines;
  std::size_t number = 1;
  while (!text.empty()) {
    const auto end = text.find('\n');
    lines.push_back({number++, trim(text.substr(0, end))});
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_key(std::string_view s) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && std::all_of(s.begin(), s.end(), word);
}

enum class line_status { ok, malformed, out_of_range };

template <class T>
line_status parse_unsigned(std::string_view s, T& out) {
  if (!all_digits(s)) return line_status::malformed;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) return line_status::out_of_range;
  return ec == std::errc{} && end == s.data() + s.size() ? line_status::ok : line_status::malformed;
}

struct property {
  std::string_view key;
  std::uint64_t value = 0;
};

// `line` is trimmed and not blank.
line_status parse_property_line(std::string_view line, property& out) {
  const auto gap = line.find_first_of(" \t");
  if (gap == std::string_view::npos) return line_status::malformed;
  out.key = line.substr(0, gap);
  if (!is_key(out.key)) return line_status::malformed;
  return parse_unsigned(trim(line.substr(gap)), out.value);
}

std::string shown(std::string_view line) {
  constexpr std::size_t max_shown = 100;
  return "'" + std::string(line.substr(0, max_shown)) + (line.size() > max_shown ? "...'" : "'");
}

[[noreturn]] void throw_bad_line(const std::string& origin, std::size_t number,
                                 std::string_view line, line_status status,
                                 std::string_view expected) {
  const std::string where = origin + ":" + std::to_string(number) + ": ";
  if (status == line_status::out_of_range)
    throw_error(errc::parse_error, where + "the value in " + shown(line) + " does not fit in 64 bits");
  throw_error(errc::parse_error, where + "expected " + std::string(expected) + ", got " +
                                     shown(line) + "; the input is damaged or not KFD properties");
}

constexpr std::string_view property_line_expected =
    "a 'key value' line (a name and an unsigned decimal)";

void add_property(std::map<std::string, std::uint64_t>& props, const property& p,
                  const std::string& origin, std::size_t number) {
  if (!props.emplace(std::string(p.key), p.value).second)
    throw_error(errc::parse_error, origin + ":" + std::to_string(number) + ": key '" +
                                       std::string(p.key) + "' appears twice in one properties file");
}

// The kernel prints these two first in every node's properties; without them a node cannot be
// told CPU from GPU, so the file is truncated or is not a node's properties.
void require_node_keys(const std::map<std::string, std::uint64_t>& props, const std::string& where) {
  for (const char* key : {"cpu_cores_count", "simd_count"})
    if (props.count(key) == 0)
      throw_error(errc::parse_error, where + ": no '" + key + "' line; every KFD node properties "
                                             "file has one, so this one is truncated or is not a "
                                             "node's properties");
}

std::uint64_t u64_field(const std::map<std::string, std::uint64_t>& props, const std::string& key,
                        const std::string& origin) {
  const auto it = props.find(key);
  if (it == props.end())
    throw_error(errc::parse_error, origin + ": no '" + key + "' line; the kernel always writes it, "
                                            "so the file is truncated");
  return it->second;
}

std::uint32_t u32_field(const std::map<std::string, std::uint64_t>& props, const std::string& key,
                        const std::string& origin) {
  const std::uint64_t v = u64_field(props, key, origin);
  if (v > std::numeric_limits<std::uint32_t>::max())
    throw_error(errc::parse_error, origin + ": " + key + " " + std::to_string(v) +
                                       " does not fit the 32-bit field the kernel prints it from");
  return static_cast<std::uint32_t>(v);
}

kfd_mem_bank mem_bank_from(const std::map<std::string, std::uint64_t>& p, const std::string& origin) {
  kfd_mem_bank b;
  b.heap_type = u32_field(p, "heap_type", origin);
  b.size_bytes = u64_field(p, "size_in_bytes", origin);
  b.flags = u32_field(p, "flags", origin);
  b.width = u32_field(p, "width", origin);
  b.mem_clk_max = u32_field(p, "mem_clk_max", origin);
  return b;
}

kfd_io_link io_link_from(const std::map<std::string, std::uint64_t>& p, const std::string& origin) {
  kfd_io_link l;
  l.type = u32_field(p, "type", origin);
  l.node_from = u32_field(p, "node_from", origin);
  l.node_to = u32_field(p, "node_to", origin);
  l.weight = u32_field(p, "weight", origin);
  l.min_bandwidth = u32_field(p, "min_bandwidth", origin);
  l.max_bandwidth = u32_field(p, "max_bandwidth", origin);
  l.flags = u32_field(p, "flags", origin);
  return l;
}

// Numbered entries of a sysfs directory in numeric order; the kernel creates no others.
std::vector<std::uint32_t> numbered_entries(const fs_root& root, const std::string& dir) {
  std::vector<std::uint32_t> ids;
  for (const std::string& name : root.list(dir)) {
    std::uint32_t id = 0;
    if (parse_unsigned(name, id) == line_status::ok)
      ids.push_back(id);
    else
      log().debug("skipping '{}' in {}: not a numbered entry", name, root.resolve(dir).string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::optional<std::uint64_t> read_number_file(const fs_root& root, const std::string& path) {
  const auto line = root.read_line(path);
  if (!line) return std::nullopt;
  std::uint64_t v = 0;
  const line_status status = parse_unsigned(trim(*line), v);
  if (status != line_status::ok)
    throw_bad_line(root.resolve(path).string(), 1, *line, status, "an unsigned decimal");
  return v;
}

// One pass over nodes/. `missing` names a properties file whose directory was listed but which
// could not be read: the topology changed under the pass, or a captured tree is incomplete.
struct scan_pass {
  std::vector<kfd_node> nodes;
  std::string missing;
};

// Reads dir/<id>/properties of each numbered entry of dir; false if one is missing.
bool read_numbered_properties(const fs_root& root, const std::string& dir, scan_pass& pass,
                              const std::function<void(const std::map<std::string, std::uint64_t>&,
                                                       const std::string& origin)>& take) {
  for (std::uint32_t id : numbered_entries(root, dir)) {
    const std::string path = dir + "/" + std::to_string(id) + "/properties";
    const auto text = root.read(path);
    if (!text) {
      pass.missing = path;
      return false;
    }
    const std::string origin = root.resolve(path).string();
    take(parse_kfd_properties(*text, origin), origin);
  }
  return true;
}

scan_pass scan_nodes(const fs_root& root, const std::string& topology_dir) {
  scan_pass pass;
  const std::string nodes_dir = topology_dir + "/nodes";
  for (std::uint32_t id : numbered_entries(root, nodes_dir)) {
    const std::string node_dir = nodes_dir + "/" + std::to_string(id);
    const std::string props_path = node_dir + "/properties";
    const auto text = root.read(props_path);
    if (!text) {
      pass.missing = props_path;
      return pass;
    }
    kfd_node node;
    node.id = id;
    const std::string origin = root.resolve(props_path).string();
    node.properties = parse_kfd_properties(*text, origin);
    require_node_keys(node.properties, origin);
    node.name = root.read_line(node_dir + "/name").value_or("");
    node.gpu_id = read_number_file(root, node_dir + "/gpu_id").value_or(0);
    const bool complete =
        read_numbered_properties(root, node_dir + "/mem_banks", pass,
                                 [&](const auto& p, const std::string& o) {
                                   node.mem_banks.push_back(mem_bank_from(p, o));
                                 }) &&
        read_numbered_properties(root, node_dir + "/io_links", pass,
                                 [&](const auto& p, const std::string& o) {
                                   node.io_links.push_back(io_link_from(p, o));
                                 });
    if (!complete) return pass;
    pass.nodes.push_back(std::move(node));
  }
  return pass;
}

std::string generation_text(const std::optional<std::uint64_t>& g) {
  return g ? std::to_string(*g) : std::string("absent");
}

bool is_separator(std::string_view line) {
  return line.size() >= 3 && line.find_first_not_of('-') == std::string_view::npos;
}

// "*" or "<N>" when `line` is a command naming topology/nodes/{*,<N>}/properties.
std::optional<std::string_view> properties_command_target(std::string_view line) {
  constexpr std::string_view anchor = "topology/nodes/";
  constexpr std::string_view suffix = "/properties";
  const auto at = line.find(anchor);
  if (at == std::string_view::npos || !line.ends_with(suffix)) return std::nullopt;
  const std::size_t begin = at + anchor.size();
  if (begin + suffix.size() > line.size()) return std::nullopt;
  const std::string_view target = line.substr(begin, line.size() - suffix.size() - begin);
  if (target == "*" || all_digits(target)) return target;
  return std::nullopt;
}

// The node ids `cat nodes/*/properties` visits, in order: the shell sorts names as text.
std::vector<std::uint32_t> glob_order(std::size_t count) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
  std::sort(names.begin(), names.end());
  std::vector<std::uint32_t> ids;
  for (const std::string& n : names) ids.push_back(static_cast<std::uint32_t>(std::stoul(n)));
  return ids;
}

bool skippable(std::string_view line) { return line.empty() || line.starts_with('#'); }

}  // namespace

std::map<std::string, std::uint64_t> parse_kfd_properties(std::string_view text,
                                                          const std::string& origin) {
  std::map<std::string, std::uint64_t> props;
  for (const numbered_line& line : split_lines(text)) {
    if (line.text.empty()) continue;
    property p;
    const line_status status = parse_property_line(line.text, p);
    if (status != line_status::ok)
      throw_bad_line(origin, line.number, line.text, status, property_line_expected);
    add_property(props, p, origin, line.number);
  }
  return props;
}

std::vector<kfd_node> read_kfd_topology(const fs_root& root, const kfd_scan_options& options) {
  std::string dir;
  if (root.exists(kfd_topology_path))
    dir = kfd_topology_path;
  else if (root.exists(kfd_topology_fallback_path))
    dir = kfd_topology_fallback_path;
  else {
    log().debug("no KFD topology under {} (no amdgpu/amdkfd driver): no KFD nodes",
                root.resolve(kfd_topology_path).string());
    return {};
  }
  const std::string generation_path = dir + "/generation_id";
  const int attempts = std::max(1, options.max_attempts);
  std::optional<std::uint64_t> before = read_number_file(root, generation_path);
  std::optional<std::uint64_t> after;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    scan_pass pass = scan_nodes(root, dir);
    if (options.after_pass) options.after_pass(attempt);
    after = read_number_file(root, generation_path);
    if (after == before) {
      if (!pass.missing.empty())
        throw_error(errc::parse_error,
                    root.resolve(pass.missing).string() + " is missing although its directory is "
                    "listed and generation_id did not change: the tree is incomplete (a capture "
                    "must keep every properties file)");
      log().debug("read {} KFD nodes from {} (generation_id {})", pass.nodes.size(),
                  root.resolve(dir).string(), generation_text(after));
      return std::move(pass.nodes);
    }
    log().debug("KFD generation_id changed from {} to {} during scan {}; rescanning",
                generation_text(before), generation_text(after), attempt + 1);
    before = after;
  }
  throw_error(errc::io_error,
              "KFD topology at " + root.resolve(dir).string() + " changed during each of " +
                  std::to_string(attempts) + " scans (generation_id now " +
                  generation_text(after) + "): GPUs are being added, removed or repartitioned; "
                  "retry once that has finished");
}

std::vector<kfd_node> import_kfd_properties_dump(std::string_view text, const std::string& origin) {
  const std::vector<numbered_line> lines = split_lines(text);

  std::optional<std::size_t> command;  // index into lines
  std::string_view target = "*";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (skippable(lines[i].text)) continue;
    const auto t = properties_command_target(lines[i].text);
    if (!t) continue;
    if (command)
      throw_error(errc::parse_error,
                  origin + ":" + std::to_string(lines[i].number) + ": a second properties "
                  "command (the first is at line " + std::to_string(lines[*command].number) +
                  "); import one dump at a time");
    command = i;
    target = *t;
  }

  std::size_t begin = 0;
  if (command) {
    begin = *command + 1;
    const auto first = std::find_if(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(*command),
                                    [](const numbered_line& l) { return !skippable(l.text); });
    if (first != lines.begin() + static_cast<std::ptrdiff_t>(*command))
      log().debug("{}: lines {}-{} precede the properties command and are not part of the dump",
                  origin, first->number, lines[*command].number - 1);
  }
  const bool separated = std::any_of(lines.begin() + static_cast<std::ptrdiff_t>(begin), lines.end(),
                                     [](const numbered_line& l) { return is_separator(l.text); });

  struct block {
    std::size_t first_line = 0;
    std::map<std::string, std::uint64_t> props;
  };
  std::vector<block> blocks;
  std::string first_key;
  bool open = false;
  for (std::size_t i = begin; i < lines.size(); ++i) {
    const numbered_line& line = lines[i];
    if (skippable(line.text)) continue;
    if (is_separator(line.text)) {
      open = false;
      continue;
    }
    property p;
    const line_status status = parse_property_line(line.text, p);
    if (status != line_status::ok)
      throw_bad_line(origin, line.number, line.text, status,
                     std::string(property_line_expected) + " or a '----' node separator");
    if (first_key.empty()) first_key = p.key;
    // Without separators, files are concatenated: each one starts with the same first key.
    if (!open || (!separated && p.key == first_key)) {
      blocks.push_back({line.number, {}});
      open = true;
    }
    add_property(blocks.back().props, p, origin, line.number);
  }

  if (blocks.empty())
    throw_error(errc::parse_error,
                origin + ": no KFD node properties found" +
                    (command ? " after the command at line " + std::to_string(lines[*command].number)
                             : std::string()) +
                    "; expected the output of cat /sys/class/kfd/kfd/topology/nodes/*/properties");

  std::vector<std::uint32_t> ids;
  if (target == "*") {
    ids = glob_order(blocks.size());
  } else {
    std::uint32_t id = 0;
    if (parse_unsigned(target, id) != line_status::ok || blocks.size() != 1)
      throw_error(errc::parse_error,
                  origin + ":" + std::to_string(lines[*command].number) + ": the command names " +
                      "the single node " + std::string(target) + " but " +
                      std::to_string(blocks.size()) + " node blocks follow");
    ids.push_back(id);
  }

  std::vector<kfd_node> nodes;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    require_node_keys(blocks[i].props, origin + ":" + std::to_string(blocks[i].first_line) +
                                           " (node block starting here)");
    kfd_node node;
    node.id = ids[i];
    node.properties = std::move(blocks[i].props);
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const kfd_node& a, const kfd_node& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace umem::hsa
