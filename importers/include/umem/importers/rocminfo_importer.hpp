// Importing the text printed by `rocminfo` (ROCm 5.x to 7.x, padded or unpadded) into the model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "umem/core/topology.hpp"
#include "umem/importers/import_diagnostic.hpp"

namespace umem::importers {

struct rocminfo_import {
  // Filled: sources, hsa (state imported; fields rocminfo prints, others nullopt) and agents.
  umem::topology topo;
  // Lines that were not used: unknown keys, lines without "Key: value" structure, incomplete
  // pool blocks. Keys rocminfo prints that umem does not model are skipped without a diagnostic.
  std::vector<import_diagnostic> unrecognized;
};

// Leading '#' comment lines, the shell prompt and the "ROCk module ... is loaded" line are
// accepted before the first "=====" banner. `origin` names the input in messages and sources.
// Throws umem::error(parse_error) "origin:LINE: ..." when a value umem uses cannot be parsed, an
// agent lacks Name/Node/Device Type, or the input holds no agent at all.
rocminfo_import import_rocminfo(std::string_view text, const std::string& origin);

}  // namespace umem::importers
