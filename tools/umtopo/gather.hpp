// `umtopo --gather FILE`: the node as its discovery backends saw it, raw, for exact replay
// elsewhere (`umtopo --from-gather FILE`, gather_replay.hpp), the way hwloc-gather-topology
// captures a machine for HWLOC_FSROOT.
//
// The archive (tar_gz.hpp) holds:
//   manifest.json  gather_manifest.hpp: date, kernel, umem version, what was absent
//   runtime.json   the runtime answers (ROCr or CUDA agents, pools, system attributes, the
//                  backend choice, the hostname) as a snapshot (core/snapshot.hpp) holding only those
//   rocminfo.txt   `rocminfo` output, when the command exists (a second witness of the runtime)
//   root/...       the raw sysfs/procfs files of gather_inputs.hpp, at their absolute paths
// Nothing else: no user files, no environment variable but umem's own (UMEM_*, in the manifest).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "gather_manifest.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::umtopo {

// The entries gather.cpp and gather_replay.cpp agree on.
inline constexpr const char* kManifestEntry = "manifest.json";
inline constexpr const char* kRuntimeEntry = "runtime.json";
inline constexpr const char* kRocminfoEntry = "rocminfo.txt";
inline constexpr const char* kRootEntry = "root";

// `rocminfo`'s output, or nullopt with `why` set when the command is missing or fails.
std::optional<std::string> run_rocminfo(std::string& why);

// Writes the gather of the node whose files are under `root` ("/" for this one) and whose runtime
// answered `live` (discover_live_machine). Returns the manifest written. Throws umem::error.
gather_manifest write_gather(const std::filesystem::path& file, const fs_root& root, const topology& live,
                             const std::optional<std::string>& rocminfo, const std::string& rocminfo_absent_why);

}  // namespace umem::umtopo
