// Which thread_cache belongs to which thread, for one caching_pool, and their lifetimes.
//
// Note [Thread cache lifetime]
// A thread's caches are owned by the thread (a thread_local list) and registered with their
// pool's registry; the two can end in either order. At thread exit the thread returns its cached
// blocks to the pool (give_back) and unregisters; when the pool goes first its registry detaches
// the caches, which then wait, unused, for their thread's exit. Both sides take one process-wide
// registry mutex, also held by steal_all() and totals(), and always before a pool's own mutex
// (never the other way round), so the two cannot deadlock. The fast lookup, mine(), reads only
// thread-local data: the last cache used, keyed by the registry's serial number, which is never
// reused, so a registry at the address of a destroyed one is never confused with it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "umem/allocator/detail/pool/thread_cache.hpp"

namespace umem::alloc {

namespace detail {
// The calling thread's last used cache, keyed by its registry's serial. Trivially initialized,
// so reading it needs no thread_local guard, and in the initial-exec TLS model (16 bytes of the
// static TLS space glibc keeps for libraries loaded with dlopen), so reading it is one
// instruction instead of a __tls_get_addr call.
struct last_thread_cache {
  std::uint64_t serial;
  thread_cache* cache;
};
[[gnu::tls_model("initial-exec")]] inline thread_local last_thread_cache t_last_cache{0, nullptr};
}  // namespace detail

class thread_cache_registry {
 public:
  // Receives a cache's stolen blocks (state cached) while its steal is still pending, so that it
  // may also take the cache's slabs (thread_cache::steal_slabs); `exiting`: the cache's thread
  // is exiting. Called with the registry mutex held, so it may take the pool's mutex. Returns
  // the bytes it gave back to the pool.
  using give_back_fn =
      std::function<std::size_t(thread_cache& cache, std::vector<block*>& blocks, bool exiting)>;

  // capacity_bytes 0, or no membarrier() on this system (asymmetric_fence_available()): no thread
  // caches (mine() returns nullptr).
  thread_cache_registry(std::size_t capacity_bytes, std::size_t small_max,
                        give_back_fn give_back);
  ~thread_cache_registry();
  thread_cache_registry(const thread_cache_registry&) = delete;
  thread_cache_registry& operator=(const thread_cache_registry&) = delete;

  bool enabled() const { return capacity_ != 0; }
  // Never reused by another registry (Note [Thread cache lifetime]).
  std::uint64_t serial() const { return serial_; }
  // The calling thread's cache, created on first use; nullptr when disabled.
  thread_cache* mine() {
    const detail::last_thread_cache& last = detail::t_last_cache;
    return last.serial == serial_ ? last.cache : find_or_create(true);
  }
  // The calling thread's cache if it has one.
  thread_cache* mine_if_any() {
    const detail::last_thread_cache& last = detail::t_last_cache;
    return last.serial == serial_ ? last.cache : find_or_create(false);
  }

  // Every thread's cached blocks and free slabs, through give_back; the bytes it gave back.
  std::size_t steal_all();
  // The sum over all threads' caches, including those of threads that exited.
  thread_cache_totals totals() const;

  // In a forked child, from the fork handler: forgets every registry's caches but the calling
  // thread's (Note [Fork] in fork_guard.hpp).
  static void keep_only_callers_caches();

 private:
  friend struct thread_cache_owner;  // the thread-local side (thread_cache_registry.cpp)
  struct owned;                       // one thread's cache of this registry

  thread_cache* find_or_create(bool create);

  const std::uint64_t serial_;
  const std::size_t capacity_;
  const std::size_t small_max_;
  give_back_fn give_back_;
  std::vector<owned*> caches_;     // guarded by the process-wide registry mutex
  thread_cache_totals retired_;    // of the caches whose threads exited; guarded by it too
};

}  // namespace umem::alloc
