// A versioned JSON snapshot of the whole topology model: `umtopo --capture FILE` writes one and
// `umtopo --snapshot FILE` replays it, so a user can attach their node to a bug report.
// load(save(t)) == t for every model.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "umem/core/topology.hpp"

namespace umem {

std::string snapshot_to_json(const topology& topo);
// Throws umem::error(parse_error) naming `origin` and what is wrong (bad JSON, wrong schema
// version, missing or mistyped field).
topology snapshot_from_json(std::string_view text, const std::string& origin = "<snapshot>");

void save_snapshot(const topology& topo, const std::filesystem::path& file);
topology load_snapshot(const std::filesystem::path& file);

}  // namespace umem
