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
// GPU runtimes: a forked child cannot use the parent's. KFD refuses every ioctl from a process
// other than the one that opened /dev/kfd (Linux drivers/gpu/drm/amd/amdkfd/kfd_chardev.c,
// kfd_ioctl: "Using KFD FD in wrong process", -EBADF; libhsakmt's CHECK_KFD_OPEN fails first), so
// ROCr's and HIP's locks, SVM attributes and pool allocations fail there, and the CUDA driver is
// initialized per process (cuInit: "in the current process"; PyTorch marks such a child a "bad
// fork", torch/csrc/cuda/Module.cpp). So the GPU mappers note the process that made them
// (creating_process) and, in any other one, make no runtime call: the child's new segments are
// host memory only (gpu_accessible() answers false there), and unmapping a segment, inherited or
// new, skips the unlock/unregister (the child's copies of the parent's pages were never locked
// by the child). The check is a getpid() per segment map/unmap, never per allocation. The
// mappers' destructors leave the runtime alone there too.
// Not covered: device memory of discrete GPUs (rocr_device_source, cuda_device_source), which a
// child cannot have: its allocation fails with the runtime's error, and freeing an inherited
// device block logs the runtime's refusal.
// Not covered: spdlog's own locks (logging is off by default), and memory the parent frees after
// the fork, which the child still sees as live (its pages are copies).
#pragma once

#include <memory>
#include <mutex>
#include <shared_mutex>

namespace umem::detail {
class spin_lock;  // core/detail/spin_lock.hpp (internal)
}  // namespace umem::detail

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

// The process an object was made in (Note [Fork]: GPU runtime state belongs to it alone).
class creating_process {
 public:
  creating_process() noexcept;
  // True in any other process: a forked child (or grandchild) of the creator. One getpid().
  bool is_other() const noexcept;

 private:
  int pid_;
};

// While the returned handle lives, `m` is locked before every fork() of the process and unlocked
// after it, in the parent and in the child (Note [Fork]). Throws std::bad_alloc, or
// umem::error(runtime_error) when pthread_atfork fails.
[[nodiscard]] std::shared_ptr<void> lock_around_fork(std::mutex& m, fork_rank rank);
[[nodiscard]] std::shared_ptr<void> lock_around_fork(std::shared_mutex& m, fork_rank rank);
[[nodiscard]] std::shared_ptr<void> lock_around_fork(umem::detail::spin_lock& m, fork_rank rank);

}  // namespace umem::alloc
