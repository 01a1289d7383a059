// Line splitting, trimming and strict number parsing shared by the text importers (internal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "umem/core/detail/text.hpp"

namespace umem::importers::detail {

struct text_line {
  int number = 0;         // 1-based
  std::string_view text;  // without "\n" or "\r\n"
};

std::vector<text_line> split_lines(std::string_view text);

using umem::detail::trim;  // white space as in umem/core/detail/text.hpp
using umem::detail::trim_right;
// Number of leading ' ' characters.
std::size_t indent_of(std::string_view s);
bool is_blank(std::string_view s);
// Words separated by spaces or tabs.
std::vector<std::string_view> split_words(std::string_view s);

// The whole of `s` as a decimal number (no sign, no spaces); nullopt if not, or if it overflows.
std::optional<std::uint64_t> parse_u64(std::string_view s);
std::optional<std::uint32_t> parse_u32(std::string_view s);
// The whole of `s` as hexadecimal digits (no "0x").
std::optional<std::uint64_t> parse_hex_u64(std::string_view s);

// Throws parse_error naming the first line that is not valid UTF-8 (a corrupted or binary
// capture), so that no such bytes reach the model's strings (a snapshot must be valid JSON).
void require_utf8(const std::vector<text_line>& lines, const std::string& origin);

// `s` for an error message: at most 60 characters, non-printable bytes as '?'.
std::string quote(std::string_view s);

// Throws umem::error(parse_error) "origin:line: message".
[[noreturn]] void fail_at(const std::string& origin, int line, const std::string& message);

}  // namespace umem::importers::detail
