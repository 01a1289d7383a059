#include "kfd_properties_text.hpp"

#include <algorithm>

#include "umem/core/error.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace umem::hsa {
namespace detail {

namespace {

bool is_key(std::string_view s) {
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') && std::all_of(s.begin(), s.end(), word);
}

std::string shown(std::string_view line) {
  constexpr std::size_t max_shown = 100;
  return "'" + std::string(line.substr(0, max_shown)) + (line.size() > max_shown ? "...'" : "'");
}

}  // namespace


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

line_status parse_property_line(std::string_view line, property& out) {
  const auto gap = line.find_first_of(" \t");
  if (gap == std::string_view::npos) return line_status::malformed;
  out.key = line.substr(0, gap);
  if (!is_key(out.key)) return line_status::malformed;
  return parse_unsigned(trim(line.substr(gap)), out.value);
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

void add_property(std::map<std::string, std::uint64_t>& props, const property& p,
                  const std::string& origin, std::size_t number) {
  if (!props.emplace(std::string(p.key), p.value).second)
    throw_error(errc::parse_error, origin + ":" + std::to_string(number) + ": key '" +
                                       std::string(p.key) + "' appears twice in one properties file");
}

void require_node_keys(const std::map<std::string, std::uint64_t>& props, const std::string& where) {
  for (const char* key : {"cpu_cores_count", "simd_count"})
    if (props.count(key) == 0)
      throw_error(errc::parse_error, where + ": no '" + key + "' line; every KFD node properties "
                                             "file has one, so this one is truncated or is not a "
                                             "node's properties");
}

}  // namespace detail

using namespace detail;

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

}  // namespace umem::hsa
