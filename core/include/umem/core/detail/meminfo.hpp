// The counters of a meminfo file (/proc/meminfo, /sys/devices/system/node/node<N>/meminfo), parsed
// in one place for every layer that reads them (internal, detail/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "umem/core/fs_root.hpp"

namespace umem::detail {

// Bytes of `field` ("MemTotal", "MemFree", "Active(file)", ...) in meminfo `text`, read from `path`
// under `root`: the line "<field>: <n> kB", after the "Node N " that node files put first; nullopt
// when no line names the field. Throws umem::error(parse_error) naming the file and the line for a
// line of that field that is not "<field>: <n> kB" (or whose bytes do not fit 64 bits).
std::optional<std::uint64_t> meminfo_bytes(const fs_root& root, const std::string& path,
                                           std::string_view text, std::string_view field);

}  // namespace umem::detail
