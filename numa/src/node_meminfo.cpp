#include "umem/numa/node_meminfo.hpp"

#include <algorithm>
#include <string>

#include "umem/core/detail/meminfo.hpp"

namespace umem::numa {
namespace {

std::string node_path(int node) {
  return "/sys/devices/system/node/node" + std::to_string(node) + "/meminfo";
}

}  // namespace

std::optional<std::uint64_t> node_meminfo_bytes(const fs_root& root, int node,
                                                std::string_view field) {
  if (node < 0) return std::nullopt;
  const std::string path = node_path(node);
  const auto text = root.read(path);
  return text ? umem::detail::meminfo_bytes(root, path, *text, field) : std::nullopt;
}

std::optional<std::uint64_t> node_obtainable_bytes(const fs_root& root, int node) {
  if (node < 0) return std::nullopt;
  const std::string path = node_path(node);
  const auto text = root.read(path);  // once: the counters of one moment
  if (!text) return std::nullopt;
  const auto free = umem::detail::meminfo_bytes(root, path, *text, "MemFree");
  if (!free) return std::nullopt;
  const std::uint64_t file = umem::detail::meminfo_bytes(root, path, *text, "Active(file)").value_or(0) +
                             umem::detail::meminfo_bytes(root, path, *text, "Inactive(file)").value_or(0);
  const std::uint64_t total = umem::detail::meminfo_bytes(root, path, *text, "MemTotal").value_or(0);
  const auto system = root.read("/proc/meminfo");
  const std::uint64_t swap =
      system ? umem::detail::meminfo_bytes(root, "/proc/meminfo", *system, "SwapFree").value_or(0) : 0;
  const std::uint64_t reserve = std::max<std::uint64_t>(std::uint64_t{32} << 20, total / 512);
  const std::uint64_t have = *free + file / 2 + swap;
  return have > reserve ? have - reserve : 0;
}

}  // namespace umem::numa
