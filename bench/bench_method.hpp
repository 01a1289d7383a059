// The numbers of the alloc+free method, shared by the loops
// (alloc_free_bench.hpp) and the report that describes them (report.cpp), so
// the prose cannot drift from what ran.
#pragma once

#include <cstddef>

namespace umem::bench {

// Live blocks per thread in the mixes: a free always releases the block
// allocated 8 steps ago, so frees do not simply undo the last allocation (as
// they do in the single-size loop).
inline constexpr std::size_t mix_live_blocks = 8;
inline constexpr std::size_t mix_length = 512;
inline constexpr int max_warm_passes = 128;
inline constexpr int fault_free_passes =
    8; // in a row, to end a warm-up (Note [Warm state])

} // namespace umem::bench
