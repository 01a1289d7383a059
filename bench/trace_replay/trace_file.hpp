// Reading a trace file, gzip'd (name ends in .gz) or plain text.
#pragma once

#include <filesystem>

#include "trace.hpp"

namespace umem::trace_replay {

// Throws umem::error: not_found for a missing file, io_error for an unreadable or corrupt one,
// parse_error (trace.hpp) for a malformed line.
trace load_trace(const std::filesystem::path& path);

// The metadata's number `key` (e.g. "cca_peak_reserved_bytes"), or 0 when absent or not JSON.
std::uint64_t metadata_number(const trace& t, const char* key);

}  // namespace umem::trace_replay
