// `umtopo --draw FILE`: the node as a picture, the way lstopo draws one. One box per socket with
// its CPUs, memory (total, GPU-allocatable under the TTM cap, free), CPU agent and GPU agents
// (XNACK, APU, pools); a line per pair of sockets labelled with their NUMA distance; each check
// finding above info marked in red (error) or amber (warning) on the part it concerns (ttm-limit
// on memory, xnack-off on GPUs, gpu-not-local on unplaced GPUs), node-wide ones in a box below.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "checks.hpp"
#include "umem/core/topology.hpp"

namespace umem::umtopo {

// A standalone SVG 1.1 document (width and height in px on the root element).
std::string render_svg(const topology& topo, const std::vector<finding>& findings);

// FILE.svg: the SVG as it is; FILE.png: converted by rsvg-convert (librsvg2-bin), an error naming
// the package when it is not installed. Any other suffix is an error.
void write_drawing(const std::filesystem::path& file, const std::string& svg);

}  // namespace umem::umtopo
