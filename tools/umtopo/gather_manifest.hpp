// manifest.json of a gather: what was gathered where and when, and what the node lacked. A replay
// reads it first and refuses an archive that is not a gather or of a version it does not know.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace umem::umtopo {

inline constexpr int kGatherVersion = 1;

struct gather_manifest {
  int version = kGatherVersion;
  std::string date;            // UTC, ISO 8601, when the gather was taken
  std::string kernel_release;  // uname -r
  std::string kernel_version;  // uname -v
  std::string machine;         // uname -m
  std::string umem_version;    // of the umtopo that gathered
  // Paths (or commands) a discovery backend reads that the node did not have, and files that
  // were there but could not be read (root-only sysfs attributes), each "path: why".
  std::vector<std::string> absent;
  std::vector<std::string> unreadable;
  // umem's own variables that were set (UMEM_*); no other environment variable is ever recorded.
  std::map<std::string, std::string> umem_environment;
  bool operator==(const gather_manifest&) const = default;
};

std::string manifest_to_json(const gather_manifest& m);
// Throws umem::error(parse_error) naming `origin`: not JSON, not a gather manifest, or a version
// this umtopo does not read.
gather_manifest manifest_from_json(std::string_view text, const std::string& origin);

}  // namespace umem::umtopo
