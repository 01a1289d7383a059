// The human report of `umtopo`. Works for every partial model (numactl only, rocminfo only,
// nothing at all) and says what is missing rather than guessing.
// - summary (the default): one screen for a 4-socket node: one table row per GPU agent (or per
//   socket without one), the pools once per set of agents that share them, the runtime state
//   once, distances in one line where they are uniform.
// - full (--verbose): one block per APU socket with every agent and pool, then the distance
//   matrix, the runtime's attributes, the sources and the evidence of each GPU's NUMA node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

enum class report_detail { summary, full };

std::string render_report(const topology& topo, report_detail detail = report_detail::full);

// "125.2 GiB": bytes in GiB with one decimal, the unit every capacity in umtopo is shown in.
std::string format_gib(std::uint64_t bytes);
// "4 KiB", "2 MiB", "64 KiB": the largest binary unit that divides `bytes` exactly ("0 B" for 0).
std::string format_exact_bytes(std::uint64_t bytes);

}  // namespace umem::umtopo
