// The human report of `umtopo`: one block per APU socket, then the NUMA distances, the runtime
// state, the sources and how each GPU was placed on a NUMA node. Works for every partial model
// (numactl only, rocminfo only, nothing at all) and says what is missing rather than guessing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

std::string render_report(const topology& topo);

// "125.2 GiB": bytes in GiB with one decimal, the unit every capacity in umtopo is shown in.
std::string format_gib(std::uint64_t bytes);
// "4 KiB", "2 MiB", "64 KiB": the largest binary unit that divides `bytes` exactly ("0 B" for 0).
std::string format_exact_bytes(std::uint64_t bytes);

}  // namespace umem::umtopo
