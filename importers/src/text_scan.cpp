#include "text_scan.hpp"

#include <charconv>

#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"

namespace umem::importers::detail {

std::vector<text_line> split_lines(std::string_view text) {
  std::vector<text_line> lines;
  int number = 0;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({++number, line});
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

namespace {
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}
}  // namespace

std::size_t indent_of(std::string_view s) {
  std::size_t n = 0;
  while (n < s.size() && s[n] == ' ') ++n;
  return n;
}

bool is_blank(std::string_view s) { return trim(s).empty(); }

std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  while (!(s = trim(s)).empty()) {
    std::size_t end = 0;
    while (end < s.size() && !is_space(s[end])) ++end;
    words.push_back(s.substr(0, end));
    s.remove_prefix(end);
  }
  return words;
}

namespace {
template <typename T>
std::optional<T> parse_digits(std::string_view s, int base) {
  if (s.empty()) return std::nullopt;
  T value{};
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, value, base);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}
}  // namespace

// from_chars rejects a sign for unsigned types, and spaces: the strictness wanted here.
std::optional<std::uint64_t> parse_u64(std::string_view s) {
  return parse_digits<std::uint64_t>(s, 10);
}

std::optional<std::uint32_t> parse_u32(std::string_view s) {
  return parse_digits<std::uint32_t>(s, 10);
}

std::optional<std::uint64_t> parse_hex_u64(std::string_view s) {
  return parse_digits<std::uint64_t>(s, 16);
}

void require_utf8(const std::vector<text_line>& lines, const std::string& origin) {
  for (const auto& l : lines) {
    std::string_view rest = l.text;
    while (!rest.empty()) {
      const std::size_t len = umem::detail::utf8_sequence(rest);
      if (len == 0)
        fail_at(origin, l.number,
                "not valid UTF-8 at column " + std::to_string(l.text.size() - rest.size() + 1) +
                    "; expected the text the tool printed (is the capture corrupted?)");
      rest.remove_prefix(len);
    }
  }
}

std::string quote(std::string_view s) {
  constexpr std::size_t max_len = 60;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? s[i] : '?';
  }
  if (s.size() > max_len) out += "...";
  return out + "'";
}

void fail_at(const std::string& origin, int line, const std::string& message) {
  throw_error(errc::parse_error, origin + ":" + std::to_string(line) + ": " + message);
}

}  // namespace umem::importers::detail
