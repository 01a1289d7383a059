#include "umem/numa/node_meminfo.hpp"

#include <algorithm>
#include <charconv>
#include <string>

#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"

namespace umem::numa {
namespace {

// The "<prefix><field>: <n> kB" line of meminfo text `text` (read from `path`; node meminfo
// lines start "Node N ", /proc/meminfo's do not) -> bytes of the named field.
std::optional<std::uint64_t> field_bytes(const fs_root& root, const std::string& path,
                                         std::string_view text, std::string_view field) {
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    const auto at = line.find(field);
    if (at == std::string_view::npos || (at != 0 && line[at - 1] != ' ') ||
        line.substr(at + field.size()).find(':') != 0)
      continue;
    const std::string_view value = detail::trim(line.substr(at + field.size() + 1));
    std::uint64_t kib = 0;
    const std::string_view digits = value.substr(0, value.size() < 3 ? 0 : value.size() - 3);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), kib);
    if (!value.ends_with(" kB") || ec != std::errc{} || end != digits.data() + digits.size() ||
        digits.empty())
      throw_error(errc::parse_error, root.resolve(path).string() + ": expected '" +
                                         std::string(field) + ": <n> kB', got '" +
                                         std::string(line.substr(0, 100)) + "'");
    return kib * 1024;
  }
  return std::nullopt;
}

std::string node_path(int node) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/meminfo";
}

}  // namespace

std::optional<std::uint64_t> node_meminfo_bytes(const fs_root& root, int node,
                                                std::string_view field) {
  if (node < 0) return std::nullopt;
  const std::string path = node_path(node);
  const auto text = root.read(path);
  return text ? field_bytes(root, path, *text, field) : std::nullopt;
}

std::optional<std::uint64_t> node_obtainable_bytes(const fs_root& root, int node) {
  if (node < 0) return std::nullopt;
  const std::string path = node_path(node);
  const auto text = root.read(path);  // once: the counters of one moment
  if (!text) return std::nullopt;
  const auto free = field_bytes(root, path, *text, "MemFree");
  if (!free) return std::nullopt;
  const std::uint64_t file = field_bytes(root, path, *text, "Active(file)").value_or(0) +
                             field_bytes(root, path, *text, "Inactive(file)").value_or(0);
  const std::uint64_t total = field_bytes(root, path, *text, "MemTotal").value_or(0);
  const auto system = root.read("/proc/meminfo");
  const std::uint64_t swap =
      system ? field_bytes(root, "/proc/meminfo", *system, "SwapFree").value_or(0) : 0;
  const std::uint64_t reserve = std::max<std::uint64_t>(std::uint64_t{32} << 20, total / 512);
  const std::uint64_t have = *free + file / 2 + swap;
  return have > reserve ? have - reserve : 0;
}

}  // namespace umem::numa
