#include "umem/core/detail/text.hpp"

#include <cstdio>

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

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  return joined(parts, sep, [](const std::string& p) { return p; });
}

std::string join(const std::vector<int>& values, std::string_view sep) {
  return joined(values, sep, [](int v) { return std::to_string(v); });
}

}  // namespace umem::detail
