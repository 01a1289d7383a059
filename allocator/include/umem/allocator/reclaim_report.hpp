// What the reclaim ladder (Note [Reclaim ladder] in detail/pool/reclaim_ladder.hpp) did for one
// request: the part of the ladder a caller of allocator::allocate sees (request::report).
#pragma once

#include <cstddef>
#include <cstdint>

namespace umem::alloc {

enum class rung : std::uint8_t { first_try, thread_caches, stream_blocks, trim, spill };
const char* to_string(rung r);

// What one climb did, for callers that count (the torch bridge's per-device num_alloc_retries).
struct reclaim_report {
  int retries = 0;                    // attempts after a rung gave back memory
  rung served_by = rung::first_try;   // the rung whose attempt succeeded
  std::size_t released = 0;           // bytes rungs 1-3 gave back
};

}  // namespace umem::alloc
