// The registration behind lock_around_fork (fork_safety.hpp, Note [Fork]), with a hook for the
// child, for umem's layers.
#pragma once

#include <functional>

#include "umem/allocator/fork_safety.hpp"

namespace umem::alloc::detail {

// While alive, `lock` runs before every fork() of the process and `unlock` after it in the parent;
// in the child `unlock_in_child` runs (a lock whose unlock checks the owner's thread id, like
// glibc's rwlock, must be made anew there: the child's thread has another id), then, after every
// guard's, `child` (if any).
// Registering never waits for a fork in progress; the destructor does, so a guard must not be
// destroyed by a thread holding a lock of lower rank. The functions must not throw and must not
// call back into umem. Construction throws as lock_around_fork does.
class fork_guard {
 public:
  fork_guard(fork_rank rank, std::function<void()> lock, std::function<void()> unlock,
             std::function<void()> unlock_in_child, std::function<void()> child = {});
  ~fork_guard();
  fork_guard(const fork_guard&) = delete;
  fork_guard& operator=(const fork_guard&) = delete;

  struct entry;

 private:
  entry* entry_;
};

}  // namespace umem::alloc::detail
