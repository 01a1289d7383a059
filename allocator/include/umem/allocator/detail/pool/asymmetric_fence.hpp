// A fence split in two unequal halves (Linux membarrier): the frequent side orders its own
// accesses with a compiler barrier only (light()), the rare side pays a system call (heavy())
// that makes every running thread of the process execute a full memory barrier. Together they
// order a store before a load on both sides, like two full fences (Dekker's pattern), so a thread
// cache's fast path needs no locked instruction while trim() may still take its blocks
// (thread_cache.hpp, Note [Thread cache]).
#pragma once

#include <atomic>

namespace umem::alloc {

// True when heavy() works here (membarrier's private expedited command, Linux >= 4.14, not
// blocked by a seccomp filter); registers the process on first call. Thread-safe.
bool asymmetric_fence_available();

inline void asymmetric_fence_light() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// Requires asymmetric_fence_available().
void asymmetric_fence_heavy();

}  // namespace umem::alloc
