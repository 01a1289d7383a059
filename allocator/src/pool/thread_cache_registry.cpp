#include "umem/allocator/detail/pool/thread_cache_registry.hpp"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <utility>

#include "umem/allocator/detail/fork_guard.hpp"
#include "umem/allocator/detail/pool/asymmetric_fence.hpp"

namespace umem::alloc {

namespace {

// Never destroyed: pools and threads may end after static destructors have run. Locked around
// fork(); in the child only the forking thread's caches stay registered (Note [Fork]).
std::mutex& registry_mutex() {
  static auto* m = new std::mutex;
  static const auto* fork = new detail::fork_guard(
      fork_rank::thread_caches, [] { m->lock(); }, [] { m->unlock(); }, [] { m->unlock(); },
      &thread_cache_registry::keep_only_callers_caches);
  (void)fork;
  return *m;
}

// Every live registry; guarded by registry_mutex().
std::vector<thread_cache_registry*>& all_registries() {
  static auto* v = new std::vector<thread_cache_registry*>;
  return *v;
}

std::atomic<std::uint64_t> next_serial{1};

}  // namespace

struct thread_cache_registry::owned {
  std::uint64_t serial = 0;
  thread_cache_registry* registry = nullptr;  // null once the registry is gone
  std::unique_ptr<thread_cache> cache;
};

// The calling thread's caches, for every registry it used (Note [Thread cache lifetime]).
struct thread_cache_owner {
  std::vector<std::unique_ptr<thread_cache_registry::owned>> caches;

  ~thread_cache_owner() {
    std::lock_guard lock(registry_mutex());
    for (auto& oc : caches) {
      thread_cache_registry* r = oc->registry;
      if (r == nullptr) continue;
      std::vector<block*> blocks;
      oc->cache->request_steal();  // this thread is not in a bin operation: no fence needed
      oc->cache->steal(blocks);
      r->give_back_(*oc->cache, blocks, true);
      r->retired_ += oc->cache->totals();
      std::erase(r->caches_, oc.get());
    }
    detail::t_last_cache = {0, nullptr};
  }
};

namespace {
thread_local thread_cache_owner t_owner;
}  // namespace

// In a forked child (one thread, every lock free): the caches of the parent's other threads were
// copied at an unknown point of their operations and have no thread to give them back, so they
// are dropped, their counters kept; their blocks stay cached in the pool (Note [Fork]).
void thread_cache_registry::keep_only_callers_caches() {
  for (thread_cache_registry* r : all_registries())
    std::erase_if(r->caches_, [r](owned* oc) {
      for (const auto& mine : t_owner.caches)
        if (mine.get() == oc) return false;
      r->retired_ += oc->cache->totals();
      return true;
    });
}

thread_cache_registry::thread_cache_registry(std::size_t capacity_bytes,
                                             std::size_t small_max, give_back_fn give_back)
    : serial_(next_serial.fetch_add(1)),
      capacity_(capacity_bytes != 0 && asymmetric_fence_available() ? capacity_bytes : 0),
      small_max_(small_max),
      give_back_(std::move(give_back)) {
  std::lock_guard lock(registry_mutex());
  all_registries().push_back(this);
}

thread_cache_registry::~thread_cache_registry() {
  std::lock_guard lock(registry_mutex());
  for (owned* oc : caches_) oc->registry = nullptr;
  std::erase(all_registries(), this);
}

thread_cache* thread_cache_registry::find_or_create(bool create) {
  if (!enabled()) return nullptr;
  for (const auto& oc : t_owner.caches)
    if (oc->serial == serial_) {
      detail::t_last_cache = {serial_, oc->cache.get()};
      return oc->cache.get();
    }
  if (!create) return nullptr;
  auto oc = std::make_unique<owned>();
  oc->serial = serial_;
  oc->registry = this;
  oc->cache = std::make_unique<thread_cache>(capacity_, small_max_);
  thread_cache* c = oc->cache.get();
  std::lock_guard lock(registry_mutex());
  // Caches of registries that are gone are never used again.
  std::erase_if(t_owner.caches, [](const auto& o) { return o->registry == nullptr; });
  caches_.push_back(oc.get());
  t_owner.caches.push_back(std::move(oc));
  detail::t_last_cache = {serial_, c};
  return c;
}

std::size_t thread_cache_registry::steal_all() {
  std::lock_guard lock(registry_mutex());
  if (caches_.empty()) return 0;
  for (owned* oc : caches_) oc->cache->request_steal();
  asymmetric_fence_heavy();
  std::size_t bytes = 0;
  std::vector<block*> blocks;
  for (owned* oc : caches_) {
    blocks.clear();
    oc->cache->steal(blocks);
    bytes += give_back_(*oc->cache, blocks, false);
    oc->cache->end_steal();
  }
  return bytes;
}

thread_cache_totals thread_cache_registry::totals() const {
  std::lock_guard lock(registry_mutex());
  thread_cache_totals sum = retired_;
  for (const owned* oc : caches_) sum += oc->cache->totals();
  return sum;
}

}  // namespace umem::alloc
