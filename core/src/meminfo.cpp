#include "umem/core/detail/meminfo.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"

namespace umem::detail {

std::optional<std::uint64_t> meminfo_bytes(const fs_root& root, const std::string& path,
                                           std::string_view text, std::string_view field) {
  std::string_view rest = text;
  for (std::size_t number = 1; !rest.empty(); ++number) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    const auto at = line.find(field);
    if (at == std::string_view::npos || (at != 0 && line[at - 1] != ' ') ||
        line.substr(at + field.size()).find(':') != 0)
      continue;
    const std::string_view value = trim(line.substr(at + field.size() + 1));
    const std::string_view digits = value.substr(0, value.size() < 3 ? 0 : value.size() - 3);
    std::uint64_t kib = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), kib);
    if (!value.ends_with(" kB") || digits.empty() || ec != std::errc{} ||
        end != digits.data() + digits.size() || kib > std::numeric_limits<std::uint64_t>::max() / 1024)
      throw_error(errc::parse_error, root.resolve(path).string() + ":" + std::to_string(number) +
                                         ": expected '" + std::string(field) + ": <n> kB', got '" +
                                         std::string(line.substr(0, 100)) + "'");
    return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace umem::detail
