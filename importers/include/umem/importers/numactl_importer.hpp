// Importing the text printed by `numactl --hardware` into the NUMA part of the model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "umem/core/topology.hpp"
#include "umem/importers/import_diagnostic.hpp"

namespace umem::importers {

struct numactl_import {
  umem::numa_topology numa;  // nodes ascending, distances in node order (empty if not printed)
  std::vector<import_diagnostic> unrecognized;  // lines that were not used
};

// Leading '#' comment lines and the "$ numactl --hardware" prompt are accepted. Throws
// umem::error(parse_error) "origin:LINE: ..." on a malformed value or an inconsistent dump
// (node count, unknown node ids, non-square or mislabelled distance matrix, bad diagonal).
numactl_import import_numactl(std::string_view text, const std::string& origin);

}  // namespace umem::importers
