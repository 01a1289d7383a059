// umem's mutexes, locked around fork() so the child of a fork can allocate and free (what a
// PyTorch DataLoader with workers does).
//
// Note [Fork]
// fork() copies the memory of the whole process but only the calling thread. A mutex another
// thread held at that instant stays locked in the child forever, and the data it guarded may be
// half-changed, so the child's first allocation could hang (glibc malloc and mimalloc solve the
// same problem the same way). Every umem mutex that allocation or free can take registers here
// with its rank in the lock order; one pthread_atfork handler, installed with the first
// registration, locks them all before fork() (rank by rank, in registration order within a rank)
// and unlocks them after it, in the parent and in the child, so the child starts with every
// structure whole and every lock free. The order is the order in which umem's code nests them:
// creation of a process-wide object (the C ABI's default allocator, the torch bridge), a torch
// bridge, an allocator's pool index, the thread caches' registry, each caching pool, then the
// upstream sources a pool calls while holding its own mutex. Child hooks then fix what locks
// cannot: thread caches of threads that do not exist in the child are dropped (thread_cache_
// registry.cpp: their blocks stay with the pool as cached memory the child never reuses, so
// the child must not rely on all of its parent's cached memory being reusable; everything the
// child inherited that was live stays valid and may be used and freed in the child).
// Not covered: GPU runtimes (CUDA and ROCr cannot be used in a forked child at all; PyTorch says
// the same), spdlog's own locks (logging is off by default), and memory the parent frees after
// the fork, which the child still sees as live (its pages are copies).
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>

namespace umem::alloc {

// Nesting order of umem's locks, outermost first (Note [Fork]).
enum class fork_rank : int {
  creation = 0,
  bridge = 1,
  pool_index = 2,
  thread_caches = 3,
  pool = 4,
  source = 5,
};

// While the returned handle lives, `m` is locked before every fork() of the process and unlocked
// after it, in the parent and in the child (Note [Fork]). Throws std::bad_alloc, or
// umem::error(runtime_error) when pthread_atfork fails.
[[nodiscard]] std::shared_ptr<void> lock_around_fork(std::mutex& m, fork_rank rank);
[[nodiscard]] std::shared_ptr<void> lock_around_fork(std::shared_mutex& m, fork_rank rank);

}  // namespace umem::alloc
