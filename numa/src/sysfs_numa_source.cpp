#include "umem/numa/sysfs_numa_source.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "umem/core/error.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/numa/node_meminfo.hpp"

namespace umem::numa {
namespace {

constexpr const char* kNodeDir = "/sys/devices/system/node";

[[noreturn]] void throw_bad(const fs_root& root, const std::string& path, std::string_view text,
                            const char* expected) {
  throw_error(errc::parse_error, root.resolve(path).string() + ": expected " + expected + ", got '" +
                                     std::string(text.substr(0, 100)) + "'");
}

template <class T>
bool parse_number(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

// "nodeN" -> N, or -1 for other entries (possible, online, has_cpu, ...).
int node_index(const std::string& name) {
  int n = -1;
  if (!name.starts_with("node") || !parse_number(std::string_view(name).substr(4), n)) return -1;
  return n;
}

// "0-23,96-119" (empty for a memory-only node).
std::vector<unsigned> read_cpulist(const fs_root& root, const std::string& path) {
  std::vector<unsigned> cpus;
  const auto line = root.read_line(path);
  if (!line) return cpus;
  std::string_view rest = detail::trim(*line);
  while (!rest.empty()) {
    const std::string_view part = rest.substr(0, rest.find(','));
    rest.remove_prefix(std::min(rest.size(), part.size() + 1));
    const auto dash = part.find('-');
    unsigned first = 0, last = 0;
    const bool ok = dash == std::string_view::npos
                        ? parse_number(part, first) && parse_number(part, last)
                        : parse_number(part.substr(0, dash), first) && parse_number(part.substr(dash + 1), last);
    if (!ok || last < first) throw_bad(root, path, *line, "a CPU list like 0-23,96-119");
    for (unsigned c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

// Bytes held in the node's huge page pools (hugepages/hugepages-<size>kB/nr_hugepages).
std::uint64_t huge_page_bytes(const fs_root& root, const std::string& node_dir) {
  std::uint64_t total = 0;
  for (const std::string& pool : root.list(node_dir + "/hugepages")) {
    std::uint64_t kib = 0, count = 0;
    const std::string_view size = std::string_view(pool).substr(std::min(pool.size(), std::size_t{10}));
    if (!pool.starts_with("hugepages-") || !size.ends_with("kB") ||
        !parse_number(size.substr(0, size.size() - 2), kib))
      continue;
    const std::string file = node_dir + "/hugepages/" + pool + "/nr_hugepages";
    const auto line = root.read_line(file);
    if (!line) continue;
    if (!parse_number(detail::trim(*line), count)) throw_bad(root, file, *line, "a page count");
    total += count * kib * 1024;
  }
  return total;
}

std::optional<int> package_of(const fs_root& root, const std::vector<unsigned>& cpus) {
  std::optional<int> package;
  for (unsigned cpu : cpus) {
    const std::string file = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/physical_package_id";
    const auto line = root.read_line(file);
    int id = 0;
    if (!line) return std::nullopt;
    if (!parse_number(detail::trim(*line), id)) throw_bad(root, file, *line, "a package id");
    if (package && *package != id) return std::nullopt;
    package = id;
  }
  return package;
}

std::vector<std::uint32_t> read_distance_row(const fs_root& root, const std::string& path) {
  std::vector<std::uint32_t> row;
  const auto line = root.read_line(path);
  if (!line) return row;
  std::string_view rest = *line;
  while (!(rest = detail::trim(rest)).empty()) {
    const std::string_view word = rest.substr(0, rest.find(' '));
    rest.remove_prefix(word.size());
    std::uint32_t d = 0;
    if (!parse_number(word, d)) throw_bad(root, path, *line, "distances like '10 32 32 32'");
    row.push_back(d);
  }
  return row;
}

}  // namespace

numa_topology read_sysfs_numa(const fs_root& root) {
  std::vector<int> indices;
  for (const std::string& name : root.list(kNodeDir))
    if (const int n = node_index(name); n >= 0) indices.push_back(n);
  std::sort(indices.begin(), indices.end());

  numa_topology out;
  std::vector<std::vector<std::uint32_t>> rows;
  for (int n : indices) {
    const std::string dir = std::string(kNodeDir) + "/node" + std::to_string(n);
    numa_node node;
    node.os_index = n;
    node.cpus = read_cpulist(root, dir + "/cpulist");
    const std::uint64_t total = node_meminfo_bytes(root, n, "MemTotal").value_or(0);
    const std::uint64_t huge = huge_page_bytes(root, dir);
    node.memory_total_bytes = total > huge ? total - huge : 0;
    node.memory_free_bytes = node_meminfo_bytes(root, n, "MemFree");
    node.package = package_of(root, node.cpus);
    out.nodes.push_back(std::move(node));
    rows.push_back(read_distance_row(root, dir + "/distance"));
  }
  const bool square = std::all_of(rows.begin(), rows.end(), [&](const auto& r) { return r.size() == rows.size(); });
  if (!rows.empty() && square)
    out.distances = std::move(rows);
  else if (out.nodes.size() == 1)
    out.distances = {{10}};
  return out;
}

}  // namespace umem::numa
