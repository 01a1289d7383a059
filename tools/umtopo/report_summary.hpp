// The default `umtopo` report (report.hpp, report_detail::summary): what a user needs first about
// a node, on one screen for a 4-socket MI300A, pointing at --verbose and `check` for the rest.
#pragma once

#include <string>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

std::string render_summary(const topology& topo);

}  // namespace umem::umtopo
