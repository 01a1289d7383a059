#include "umem/core/detail/text.hpp"

#include <cstdio>
#include <ctime>

namespace umem::detail {
namespace {

constexpr std::string_view white = " \t\r\n\f\v";

template <class T>
std::string joined(const std::vector<T>& items, std::string_view sep, auto text) {
  std::string out;
  for (const T& item : items) {
    if (!out.empty()) out += sep;
    out += text(item);
  }
  return out;
}

}  // namespace

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(white);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(white) - first + 1);
}

std::string_view trim_right(std::string_view s) {
  const auto last = s.find_last_not_of(white);
  return last == std::string_view::npos ? std::string_view{} : s.substr(0, last + 1);
}

std::string hex(std::uintmax_t v) {
  char buf[2 + 2 * sizeof v + 1];
  std::snprintf(buf, sizeof buf, "0x%jx", v);
  return buf;
}

std::string hex(const void* p) { return hex(reinterpret_cast<std::uintptr_t>(p)); }

std::string range_text(const void* p, std::size_t bytes) {
  return std::to_string(bytes) + " bytes at " + hex(p);
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  return joined(parts, sep, [](const std::string& p) { return p; });
}

std::string join(const std::vector<int>& values, std::string_view sep) {
  return joined(values, sep, [](int v) { return std::to_string(v); });
}

std::size_t utf8_sequence(std::string_view s) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf)
    len = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (s.size() < len || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < len; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  return len;
}

bool is_utf8(std::string_view s) {
  while (!s.empty()) {
    const std::size_t len = utf8_sequence(s);
    if (len == 0) return false;
    s.remove_prefix(len);
  }
  return true;
}

std::string utc_now(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

}  // namespace umem::detail
