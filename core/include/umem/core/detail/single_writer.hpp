// Counters with one writing thread that any thread may read. Internal (detail/).
//
// Note [Single-writer counters]
// A counter only its own thread writes needs no locked instruction: the writer loads, adds and
// stores, and a reader's relaxed load sees either value. As two relaxed atomic accesses that is
// three instructions, since compilers do not fuse atomic accesses. On x86-64 it is one add to
// memory: its store is an aligned 8-byte store, which readers see whole (the Intel SDM's
// "Guaranteed Atomic Operations"). The portable form stays on other architectures and under
// ThreadSanitizer, which cannot see into the asm and checks the same logic in that form.
#pragma once

#include <atomic>
#include <cstdint>

namespace umem::detail {

// `a` += d; only the calling thread writes `a`.
[[gnu::always_inline]] inline void single_writer_add(std::atomic<std::int64_t>& a,
                                                     std::int64_t d) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  static_assert(sizeof(std::atomic<std::int64_t>) == 8 &&
                alignof(std::atomic<std::int64_t>) == 8);
  asm volatile("addq %1, %0" : "+m"(a) : "er"(d));
#else
  a.store(a.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
#endif
}

// `count` += 1 and `sum` += d, as one asm statement where single_writer_add is one: as two, GCC
// added the counters' offset to a base register first (an instruction more per call).
[[gnu::always_inline]] inline void single_writer_count(std::atomic<std::int64_t>& count,
                                                       std::atomic<std::int64_t>& sum,
                                                       std::int64_t d) {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  asm volatile("addq $1, %0\n\taddq %2, %1" : "+m"(count), "+m"(sum) : "er"(d));
#else
  single_writer_add(count, 1);
  single_writer_add(sum, d);
#endif
}

}  // namespace umem::detail
