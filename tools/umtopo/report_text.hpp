// Words and columns both forms of the report (report.cpp, report_summary.cpp) and the drawing
// (drawing.cpp) print the same way.
#pragma once

#include <cstdint>
#include <string>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

// "75.1%": part of whole with one decimal.
std::string percent(std::uint64_t part, std::uint64_t whole);
// `s` padded with spaces to `width` columns.
std::string pad(std::string s, std::size_t width);
// "fine", "coarse+kernarg", ...; "-" for a pool that is not GLOBAL.
std::string coherence_text(const memory_pool& p);
// "KFD node 4"; CUDA agents by their device ordinal, "CUDA device 0" (kfd_node is their model key).
std::string agent_label(const agent& a);
// Why there is no GPU runtime, for a state whose reason the model does not carry.
std::string default_reason(runtime_state s);
// "umtopo: 4 NUMA nodes, 4 CPU agents, 4 GPU agents[ on HOST]".
std::string headline(const topology& topo);
// "no AMD GPU runtime: <why>" or "no AMD GPU agent: ..." for a model without GPU agents, else empty.
std::string no_gpu_text(const topology& topo);

}  // namespace umem::umtopo
