#include "umem/allocator/detail/fork_guard.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <new>
#include <mutex>
#include <utility>

#include "umem/core/detail/spin_lock.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc::detail {

struct fork_guard::entry {
  std::pair<int, std::uint64_t> key;  // rank, then registration order
  std::function<void()> lock, unlock, unlock_in_child, child;
  bool locked = false;  // by the fork in progress
};

namespace {

// Two mutexes, so that registering never waits for a fork in progress: a guard is often made
// while its maker holds a lock of a lower rank (a pool is made under its allocator's pool index),
// which the fork's prepare handler may be waiting for. `active` is guarded by `forking` (held from
// prepare to the end of parent/child); new guards wait in `incoming`, guarded by `arriving`, and
// prepare takes them in after every lock it acquires, so a guard made by the holder of a lock
// prepare was waiting for is locked in its turn.
struct registry {
  std::mutex forking;
  std::mutex arriving;
  std::map<std::pair<int, std::uint64_t>, fork_guard::entry*> active;
  std::map<std::pair<int, std::uint64_t>, fork_guard::entry*> incoming;
  std::uint64_t next = 0;  // guarded by `arriving`
};

registry& the_registry() {
  static auto* r = new registry;  // never destroyed: forks may happen during static destruction
  return *r;
}

void take_in(registry& r) {
  const std::lock_guard lock(r.arriving);
  r.active.merge(r.incoming);
}

void prepare() {
  registry& r = the_registry();
  r.forking.lock();
  take_in(r);
  std::pair<int, std::uint64_t> done{-1, 0};
  for (auto it = r.active.upper_bound(done); it != r.active.end(); it = r.active.upper_bound(done)) {
    it->second->lock();
    it->second->locked = true;
    done = it->first;
    take_in(r);
  }
}

void unlock_all(registry& r, bool child) {
  for (auto it = r.active.rbegin(); it != r.active.rend(); ++it)
    if (it->second->locked) {
      it->second->locked = false;
      (child ? it->second->unlock_in_child : it->second->unlock)();
    }
}

void in_parent() {
  registry& r = the_registry();
  unlock_all(r, false);
  r.forking.unlock();
}

void in_child() {
  registry& r = the_registry();
  unlock_all(r, true);
  for (const auto& [key, e] : r.active)
    if (e->child) e->child();
  r.forking.unlock();
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const int err = ::pthread_atfork(&prepare, &in_parent, &in_child); err != 0)
      throw_error(errc::runtime_error,
                  "umem: pthread_atfork failed (error " + std::to_string(err) +
                      "): umem could not make itself safe to use in the child of a fork()");
  });
}

}  // namespace

fork_guard::fork_guard(fork_rank rank, std::function<void()> lock, std::function<void()> unlock,
                       std::function<void()> unlock_in_child, std::function<void()> child)
    : entry_(new entry{{static_cast<int>(rank), 0}, std::move(lock), std::move(unlock),
                       std::move(unlock_in_child), std::move(child)}) {
  try {
    install_handlers();
    registry& r = the_registry();
    const std::lock_guard guard(r.arriving);
    entry_->key.second = r.next++;
    r.incoming.emplace(entry_->key, entry_);
  } catch (...) {
    delete entry_;
    throw;
  }
}

fork_guard::~fork_guard() {
  registry& r = the_registry();
  {
    const std::lock_guard forking(r.forking);  // not while a fork is locking or unlocking it
    const std::lock_guard arriving(r.arriving);
    if (r.active.erase(entry_->key) == 0) r.incoming.erase(entry_->key);
  }
  delete entry_;
}

}  // namespace umem::alloc::detail

namespace umem::alloc {

// getpid(), not a pthread_atfork flag: it needs no handler installed before the fork (a mapper
// used without any pool registers none).
creating_process::creating_process() noexcept : pid_(static_cast<int>(::getpid())) {}

bool creating_process::is_other() const noexcept { return static_cast<int>(::getpid()) != pid_; }

namespace {

// A std::mutex (a normal pthread mutex) and a spin lock unlock in the child like anywhere.
template <class Lock>
std::shared_ptr<void> unlocked_in_child(Lock& m, fork_rank rank) {
  return std::make_shared<detail::fork_guard>(
      rank, [&m] { m.lock(); }, [&m] { m.unlock(); }, [&m] { m.unlock(); });
}

}  // namespace

std::shared_ptr<void> lock_around_fork(std::mutex& m, fork_rank rank) {
  return unlocked_in_child(m, rank);
}

std::shared_ptr<void> lock_around_fork(umem::detail::spin_lock& m, fork_rank rank) {
  return unlocked_in_child(m, rank);
}

// glibc's rwlock takes an unlock by a thread id other than its writer's for a reader's, so the
// child makes it anew.

std::shared_ptr<void> lock_around_fork(std::shared_mutex& m, fork_rank rank) {
  return std::make_shared<detail::fork_guard>(
      rank, [&m] { m.lock(); }, [&m] { m.unlock(); }, [&m] { new (&m) std::shared_mutex; });
}

}  // namespace umem::alloc
