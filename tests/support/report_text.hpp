// Comparing umtopo reports of one node read two ways (live and from a gather).
#pragma once

#include <algorithm>
#include <string>

namespace umem::test {

// The report without its Sources line, which names where the model came from.
inline std::string without_sources(const std::string& report) {
  std::string out;
  for (std::size_t at = 0, next; at < report.size(); at = next + 1) {
    next = std::min(report.find('\n', at), report.size());
    const std::string line = report.substr(at, next - at);
    if (!line.starts_with("Sources: ")) out += line + "\n";
  }
  return out;
}

}  // namespace umem::test
