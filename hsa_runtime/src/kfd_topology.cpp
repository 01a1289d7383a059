#include "umem/hsa_runtime/kfd_topology.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <limits>
#include <optional>

#include "kfd_properties_text.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

namespace umem::hsa {
namespace {

using namespace detail;

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
    // The kernel writes an ASCII name; anything else would not survive a snapshot (which
    // replaces bad bytes), so the model would differ from the tree it came from.
    if (!umem::detail::is_utf8(node.name))
      throw_error(errc::parse_error, root.resolve(node_dir + "/name").string() +
                                         ": the node name is not UTF-8 text; the kernel writes "
                                         "an ASCII name, so the file is damaged");
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

}  // namespace

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

}  // namespace umem::hsa
