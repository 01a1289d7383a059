// Internal to hsa_runtime: the "key value" line format of KFD properties files, shared by the
// sysfs reader (kfd_topology.cpp) and the capture importer (kfd_properties_dump.cpp).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "umem/core/detail/text.hpp"

namespace umem::hsa::detail {

struct numbered_line {
  std::size_t number = 0;  // 1-based
  std::string_view text;   // trimmed
};

using umem::detail::trim;  // without surrounding white space
std::vector<numbered_line> split_lines(std::string_view text);
bool all_digits(std::string_view s);

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
line_status parse_property_line(std::string_view line, property& out);

[[noreturn]] void throw_bad_line(const std::string& origin, std::size_t number,
                                 std::string_view line, line_status status,
                                 std::string_view expected);

inline constexpr std::string_view property_line_expected =
    "a 'key value' line (a name and an unsigned decimal)";

void add_property(std::map<std::string, std::uint64_t>& props, const property& p,
                  const std::string& origin, std::size_t number);

// Every node's properties start with cpu_cores_count and simd_count; throws parse_error at
// `where` when either is missing.
void require_node_keys(const std::map<std::string, std::uint64_t>& props, const std::string& where);

}  // namespace umem::hsa::detail
