// Text helpers shared by umem's layers (internal, detail/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace umem::detail {

// Without leading and trailing white space (space, tab, CR, LF, FF, VT).
std::string_view trim(std::string_view s);
// Without trailing white space.
std::string_view trim_right(std::string_view s);
// "0x" and lower-case hexadecimal digits: "0x1f".
std::string hex(std::uintmax_t v);
std::string hex(const void* p);
// A memory range in messages: "4096 bytes at 0x7f3a00000000" (the address as hex() writes it).
std::string range_text(const void* p, std::size_t bytes);
// The parts with `sep` between them.
std::string join(const std::vector<std::string>& parts, std::string_view sep);
std::string join(const std::vector<int>& values, std::string_view sep);
// Length of the valid UTF-8 sequence at the start of `s` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0; `s` must not be empty.
std::size_t utf8_sequence(std::string_view s);
// Every byte of `s` belongs to a valid UTF-8 sequence.
bool is_utf8(std::string_view s);

// The current time in UTC, formatted by strftime's `format` ("%Y-%m-%dT%H:%M:%SZ").
std::string utc_now(const char* format);

// Ids as ranges, "0-3,5,7-8": sorted, runs of consecutive ids collapsed (NUMA nodes, CPUs).
template <class T>
std::string format_id_ranges(std::vector<T> ids) {
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace umem::detail
