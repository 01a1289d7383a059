#include "umem/allocator/allocator.hpp"

#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/detail/pool/reclaim_ladder.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/gpu/gpu_visible_source.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/allocator/source/limiting_source.hpp"
#include "umem/allocator/source/os_memory.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/machine/gpu_memory_kind.hpp"

namespace umem::alloc {
namespace {

using pool_key = std::tuple<int, std::vector<int>, int>;  // bind mode, nodes, coherence

// The front end asks the cache its thread used last, with no call (Note [Fast front end]).
constexpr auto last_used = caching_pool::cache_lookup::last_used;
constexpr std::size_t device_small_grow_max = std::size_t{256} << 10;  // Note [Device pools]

pool_key key_of(const node_binding& b, coherence kind) {
  return {static_cast<int>(b.mode), b.nodes, static_cast<int>(kind)};
}

std::string pool_name(const node_binding& b, coherence kind) {
  std::string name;
  switch (b.mode) {
    case bind_mode::bind: name = "node" + format_node_set(b.nodes); break;
    case bind_mode::preferred: name = "preferred" + format_node_set(b.nodes); break;
    case bind_mode::interleave: name = "interleave" + format_node_set(b.nodes); break;
  }
  return name + "_" + to_string(kind);
}

std::string device_pool_name(int device) { return "device" + std::to_string(device); }

using umem::detail::hex;

byte_limits to_byte_limits(const resolved_limits& r) {
  byte_limits b;
  b.total = r.total_bytes;
  for (const auto& [node, bytes] : r.node_bytes) b.per_node[node] = bytes;
  return b;
}

}  // namespace

// Note [Fast front end]
// allocate() with the configured placement and coherence (the common call) resolves them once:
// the resolved placement and its pool are kept as a route, one for a fixed policy and one per
// calling node for `local`, read without locks, and first asks the pool's thread cache
// (caching_pool.hpp, Note [Fast path]); a fixed policy's pool is also kept alone (policy_home),
// so that a cache hit reads one pointer and no route. deallocate() offers the pointer to the
// calling thread's cache of each pool, then finds the owning pool through an append-only list of
// pools (pools live as long as the allocator), read without locks, and frees in the same pool
// lock that decides ownership. Both keep their fast path (the newest pool's cache) small and
// inline, and the rest out of line (allocate_slow, deallocate_slow), so that a hit's frame holds
// none of the slow path's locals (placement copies, strings); and the fast path asks that cache
// only if the thread used its pool last (cache_lookup::last_used: no call on a hit), leaving the
// registry lookup to the slow path. A slab object (Note [Slabs] in thread_cache.hpp) is served
// inline, and before anything else: the policy pool's slab_max and cache serial, and the newest
// pool's serial, are kept in impl itself (caching_pool::slab_route), so a slab-sized request
// compares its size and the thread's last cache without loading the pool, and a free looks the
// pointer up in the calling thread's slab table straight away. `local` keeps one such route per
// node, which allocate_policy_pool picks by the calling CPU's node (os::current_node: a
// sched_getcpu and a table) instead of resolving the route. Every other way out of
// allocate(), allocate_cached() (the torch bridge's CPU tensors) and deallocate() is a tail
// call (allocate_policy_pool and deallocate_above_slabs, then the bins and the slow path;
// allocate_front is the allocations' one shape), so a slab hit saves no registers
// (docs/log/2026-12-07-slab-objects-to-2-kib.md: 15 instructions fewer at 256 B, 12
// more at 4 KiB, no change in time there). With one pool, no global_peak_tracker is fed: that
// pool's peaks are the total's (Note [Merged peaks]); the second pool attaches the first.
// Device pools (Note [Device placements] in allocator.hpp) are in the same list, so ownership
// costs nothing more; a `device:D` request finds its GPU's pool through a per-GPU slot, read
// without locks, and a `device:D` policy keeps it in its route like any other.
struct allocator::impl {
  struct route {
    caching_pool* home = nullptr;
    resolved_placement resolved;
    coherence kind = coherence::fine;  // of home, and of the pools it spills to
    bool device_memory = false;        // home is a device pool: no spill
  };
  struct pool_entry {
    caching_pool* pool = nullptr;
    const pool_entry* next = nullptr;
    bool device_memory = false;
  };
  // What `device:D` means for one GPU, decided on its first device request.
  struct device_entry {
    int device = -1;
    std::unique_ptr<device_memory_source> source;  // null: `device:D` is host memory
    std::unique_ptr<caching_pool> pool;            // over source; destroyed before it
  };
  static constexpr std::size_t max_cached_local_nodes = 64;

  alloc_options options;
  topology topo;
  // Declaration order is destruction order reversed: pools go first (returning segments through
  // the sources), then the sources and last the mapper (which keeps its runtime loaded).
  std::unique_ptr<gpu_mapper> mapper;
  std::unique_ptr<upstream_source> host;
  std::unique_ptr<gpu_visible_source> visible;
  std::unique_ptr<limiting_source> limited;
  global_peak_tracker peaks;
  mutable std::shared_mutex pools_mutex;  // guards the containers below, not the pools
  std::shared_ptr<void> fork = lock_around_fork(pools_mutex, fork_rank::pool_index);
  std::map<pool_key, std::unique_ptr<caching_pool>> pools;
  bool tracking = false;  // the pools report to `peaks` (two pools or more)
  std::deque<pool_entry> entries;
  std::deque<route> routes;
  std::atomic<const pool_entry*> owners{nullptr};  // newest pool first
  std::atomic<const route*> policy_route{nullptr};  // for a policy other than `local`
  // policy_route's pool, for allocate()'s first test: null until it is resolved, and for `local`.
  std::atomic<caching_pool*> policy_home{nullptr};
  // A pool's slab route (caching_pool::slab_route), read without locks by the front ends' slab
  // paths: a slab_max of 0 until it is published, and a serial no thread's cache has (serials
  // start at 1).
  static constexpr std::uint64_t no_serial = ~std::uint64_t{0};
  struct published_slab_route {
    std::atomic<std::uint64_t> serial{no_serial};
    std::atomic<std::size_t> slab_max{0};
    void publish(const caching_pool& pool) {
      const caching_pool::slab_route r = pool.slab_route_of();
      serial.store(r.serial, std::memory_order_relaxed);
      slab_max.store(r.slab_max, std::memory_order_release);  // after the serial
    }
  };
  published_slab_route policy_slabs;  // policy_home's
  std::array<published_slab_route, max_cached_local_nodes> local_slabs;  // local_routes' pools
  std::atomic<std::uint64_t> newest_serial{no_serial};  // the newest pool's
  std::array<std::atomic<const route*>, max_cached_local_nodes> local_routes{};  // by node
  // Outlives the device entries (it may own what their sources use, like the runtime).
  device_source_factory device_sources;
  std::deque<device_entry> devices;  // appended under pools_mutex
  std::vector<std::atomic<const device_entry*>> device_slots;  // by GPU index, set once
  reclaim_hooks hooks;  // set before other threads use the allocator, then only read

  pool_config config() const {
    pool_config cfg;
    cfg.max_cached_bytes = options.max_cached;
    cfg.thread_cache_bytes = options.thread_cache;
    cfg.expandable_segments = options.expandable_segments;
    return cfg;
  }

  // Note [Device pools]: a GPU's own memory is PyTorch's device memory, and what counts there is
  // its peak reserved bytes, as with PyTorch's allocator. Two defaults differ from host pools, both
  // measured on allocation traces of real training (transformers GPT-2 and Llama, torchvision
  // ResNet-50, recorded on an H200 by bench/torch_alloc/record_trace.py;
  // docs/log/2026-11-30-trace-replay.md):
  // - no thread caches: PyTorch frees device blocks on its autograd threads too, and blocks held
  //   unmerged in per-thread bins made the pool grow for memory it already had (measured:
  //   docs/log/2026-12-05-comment-numbers.md); the bridge's stream cache is the fast path;
  // - blocks of 256 KiB-1 MiB never take a new small segment (Note [Medium blocks] in
  //   caching_pool.hpp): a few of them fill a 2 MiB small segment and strand its tail, while in
  //   the large pool's holes they reserved less at the peak (256 KiB chosen among 64-512 KiB;
  //   docs/log/2026-12-05-comment-numbers.md).
  pool_config device_config() const {
    pool_config cfg = config();
    cfg.thread_cache_bytes = 0;
    cfg.small_grow_max = device_small_grow_max;
    return cfg;
  }

  // The tracker a new pool reports to (Note [Fast front end]); pools_mutex held exclusively.
  global_peak_tracker* tracker_for_new_pool() {
    if (entries.empty()) return nullptr;
    if (entries.size() == 1 && !tracking) {
      entries.front().pool->attach_global(peaks);
      tracking = true;
    }
    return &peaks;
  }

  // Makes `pool` findable by deallocate() and allocation_size(); pools_mutex held exclusively.
  void add_owner(caching_pool* pool, bool device_memory) {
    entries.push_back(pool_entry{pool, owners.load(std::memory_order_relaxed), device_memory});
    owners.store(&entries.back(), std::memory_order_release);
    newest_serial.store(pool->slab_route_of().serial, std::memory_order_relaxed);
  }

  caching_pool& pool_for(const node_binding& b, coherence kind) {
    const pool_key key = key_of(b, kind);
    {
      std::shared_lock lock(pools_mutex);
      if (auto it = pools.find(key); it != pools.end()) return *it->second;
    }
    std::unique_lock lock(pools_mutex);
    if (auto it = pools.find(key); it != pools.end()) return *it->second;
    global_peak_tracker* tracker = tracker_for_new_pool();
    auto pool = std::make_unique<caching_pool>(*limited, b, kind, config(), tracker);
    caching_pool& out = *pool;
    pools.emplace(key, std::move(pool));
    add_owner(&out, false);
    log().debug("new pool {}", pool_name(b, kind));
    return out;
  }

  // GPU `device`'s entry, asking device_sources on first use. Device pools carry no NUMA binding
  // and one coherence kind (coarse: device memory is coherent with the host only at
  // synchronisation points); the source records both without applying them.
  const device_entry& device_for(int device) {
    if (device < 0 || static_cast<std::size_t>(device) >= device_slots.size())
      throw_error(errc::invalid_argument,
                  "placement 'device:" + std::to_string(device) + "': the topology has " +
                      std::to_string(device_slots.size()) + " GPU(s)");
    std::atomic<const device_entry*>& slot = device_slots[static_cast<std::size_t>(device)];
    if (const device_entry* d = slot.load(std::memory_order_acquire)) return *d;
    std::unique_lock lock(pools_mutex);
    if (const device_entry* d = slot.load(std::memory_order_acquire)) return *d;
    device_entry fresh;
    fresh.device = device;
    if (device_sources) fresh.source = device_sources(device);
    if (fresh.source) {
      pool_config cfg = device_config();
      if (const auto l = options.limit_device.find(device); l != options.limit_device.end())
        cfg.limit_bytes = limit_bytes_of(l->second, fresh.source->memory_info().second);
      fresh.pool = std::make_unique<caching_pool>(*fresh.source, node_binding{bind_mode::bind, {}},
                                                  coherence::coarse, cfg, nullptr);
    }
    devices.push_back(std::move(fresh));
    const device_entry& d = devices.back();
    if (d.pool) {
      if (global_peak_tracker* tracker = tracker_for_new_pool()) d.pool->attach_global(*tracker);
      add_owner(d.pool.get(), true);
      log().info("device:{} is served by its own memory: {}", device, d.source->describe());
    }
    slot.store(&d, std::memory_order_release);
    return d;
  }

  // Every pool with its statistics name, host pools first; pools_mutex held (shared is enough).
  template <class F>
  void for_each_pool(F&& f) const {
    for (const auto& [key, pool] : pools) f(pool_name(pool->binding(), pool->kind()), *pool);
    for (const device_entry& d : devices)
      if (d.pool) f(device_pool_name(d.device), *d.pool);
  }

  // The configured placement's route for the calling thread; resolved and cached on first use.
  const route& default_route() {
    const placement& where = options.policy;
    std::atomic<const route*>* slot = &policy_route;
    int node = -1;
    if (where.kind == placement_kind::local) {
      node = os::current_node();
      slot = node >= 0 && static_cast<std::size_t>(node) < max_cached_local_nodes
                 ? &local_routes[static_cast<std::size_t>(node)]
                 : nullptr;
    }
    if (slot)
      if (const route* r = slot->load(std::memory_order_acquire)) return *r;
    route fresh;
    if (where.kind == placement_kind::device)
      if (caching_pool* pool = device_for(where.index).pool.get()) {
        fresh.home = pool;
        fresh.resolved.binding = pool->binding();
        fresh.device_memory = true;
      }
    if (!fresh.home) {
      fresh.resolved = where.kind == placement_kind::local
                           ? resolve_placement(where, options.spill, topo, node)
                           : resolve_placement(where, options.spill, topo);
      fresh.kind = where.kind == placement_kind::device ? options.device_kind : options.kind;
      fresh.home = &pool_for(fresh.resolved.binding, fresh.kind);
    }
    std::unique_lock lock(pools_mutex);
    if (slot)
      if (const route* r = slot->load(std::memory_order_acquire)) return *r;
    routes.push_back(std::move(fresh));
    if (slot) slot->store(&routes.back(), std::memory_order_release);
    caching_pool& home = *routes.back().home;
    if (slot == &policy_route) {
      policy_home.store(&home, std::memory_order_release);
      policy_slabs.publish(home);
    } else if (slot) {
      local_slabs[static_cast<std::size_t>(node)].publish(home);
    }
    return routes.back();
  }

  const pool_entry* first_pool() const { return owners.load(std::memory_order_acquire); }

  // allocate() and deallocate() past their fast paths.
  [[gnu::noinline]] static void* allocate_slow(allocator& a, std::size_t bytes, const request& r);
  // allocate_slow with the default request, built here so allocate(bytes) builds none on a hit.
  [[gnu::noinline]] static void* allocate_slow(allocator& a, std::size_t bytes) {
    return allocate_slow(a, bytes, request{});
  }
  // A front end's request above the slab objects: the bins, then `missed(a, bytes)`.
  template <class Missed>
  [[gnu::noinline]] static void* allocate_block(allocator& a, thread_cache& mine,
                                                std::size_t rounded, std::size_t bytes,
                                                Missed missed) {
    if (void* p = mine.take(rounded, bytes)) return p;
    return missed(a, bytes);
  }
  // The front ends' one shape: a slab object of the policy pool's cache returns inline, and
  // every other way out is a tail call: `missed(a, bytes)` where that cache cannot serve, else
  // allocate_policy_pool. Both take what they need as arguments and capture at most a pointer,
  // so that the calls pass everything in registers and stay tail calls.
  template <class Unrouted, class Missed>
  [[gnu::always_inline]] static void* allocate_front(allocator& a, std::size_t bytes,
                                                     Unrouted unrouted, Missed missed) {
    // A request of 0 wraps around to the largest size here.
    const published_slab_route& slabs = a.impl_->policy_slabs;
    if (bytes - 1 < slabs.slab_max.load(std::memory_order_acquire)) {
      const std::uint64_t serial = slabs.serial.load(std::memory_order_relaxed);
      if (void* p = caching_pool::take_slab_object(serial, bytes)) return p;
      return missed(a, bytes);
    }
    return allocate_policy_pool(a, bytes, unrouted, missed);
  }
  // Past the policy pool's slab objects: for `local`, the slab objects of the calling CPU's
  // node's pool, else `unrouted(a, bytes)`; for a fixed policy its cache's bins
  // (allocate_block), else `missed(a, bytes)`.
  template <class Unrouted, class Missed>
  [[gnu::noinline]] static void* allocate_policy_pool(allocator& a, std::size_t bytes,
                                                      Unrouted unrouted, Missed missed) {
    const impl& self = *a.impl_;
    caching_pool* fixed = self.policy_home.load(std::memory_order_acquire);
    if (fixed == nullptr) {
      if (self.options.policy.kind != placement_kind::local) return unrouted(a, bytes);
      const auto node = static_cast<std::size_t>(os::current_node());
      if (node >= max_cached_local_nodes) return unrouted(a, bytes);
      const published_slab_route& slabs = self.local_slabs[node];
      if (bytes - 1 >= slabs.slab_max.load(std::memory_order_acquire)) return unrouted(a, bytes);
      const std::uint64_t serial = slabs.serial.load(std::memory_order_relaxed);
      if (void* p = caching_pool::take_slab_object(serial, bytes)) return p;
      return missed(a, bytes);
    }
    return fixed->allocate_cached_or<last_used>(  // Note [Fast path]
        bytes, [&] { return missed(a, bytes); },
        [&](thread_cache& mine, std::size_t rounded) {
          return allocate_block(a, mine, rounded, bytes, missed);
        });
  }
  // allocate_cached() where no policy pool is kept: the default route's pool.
  [[gnu::noinline]] static void* allocate_cached_slow(allocator& a, std::size_t bytes) {
    return a.impl_->default_route().home->allocate_cached(bytes);
  }
  [[gnu::noinline]] static void deallocate_slow(const pool_entry* first, void* p);
  // deallocate(p) past the newest pool's slab objects: its bins, then deallocate_slow.
  [[gnu::noinline]] static void deallocate_above_slabs(allocator& a, void* p);
  // deallocate(p) past the slab objects: the bins, then deallocate_slow.
  [[gnu::noinline]] static void deallocate_block(const pool_entry* first, thread_cache& mine,
                                                 void* p) {
    if (!mine.put_block(reinterpret_cast<std::uintptr_t>(p))) deallocate_slow(first, p);
  }

  // Rung 1 of the ladder, over every pool: a limit or the upstream may be shared.
  std::size_t flush_thread_caches() {
    std::size_t bytes = 0;
    for (const pool_entry* e = first_pool(); e; e = e->next)
      bytes += e->pool->flush_thread_caches();
    return bytes;
  }

  const pool_entry* owner_entry(const void* p) const {
    for (const pool_entry* e = first_pool(); e; e = e->next)
      if (e->pool->owns(p)) return e;
    return nullptr;
  }
};

namespace {

// limit.device<D> names a GPU of the topology whose device memory is its own (Note [Device
// placements]).
void check_device_limits(const alloc_options& options, const topology& topo) {
  const auto gpus = topo.gpus();
  for (const auto& [device, limit] : options.limit_device) {
    const std::string key = "limit.device" + std::to_string(device);
    if (static_cast<std::size_t>(device) >= gpus.size())
      throw_error(errc::invalid_argument,
                  key + ": " +
                      (gpus.empty() ? std::string("the topology has no GPU")
                                    : "the topology's GPUs are device:0 to device:" +
                                          std::to_string(gpus.size() - 1)));
    if (machine::memory_kind_of(*gpus[static_cast<std::size_t>(device)]) ==
        machine::gpu_memory_kind::unified)
      throw_error(errc::invalid_argument,
                  key + ": GPU " + std::to_string(device) +
                      " is unified: its device memory is its NUMA node's memory; limit that "
                      "with limit.node<N>");
  }
}

}  // namespace

allocator::allocator(const alloc_options& options)
    : allocator(options, machine::discover_live_machine()) {}

allocator::allocator(const alloc_options& options, machine::live_machine m)
    : impl_(std::make_unique<impl>()) {
  auto mapper = make_gpu_mapper(*m.runtime, m.topo);
  auto host = std::make_unique<host_numa_source>(host_source_config{options.huge_pages,
                                                                    options.populate});
  // The factory reads the topology the allocator keeps (impl_ outlives it).
  device_source_factory device_sources = [runtime = m.runtime, state = impl_.get()](int device) {
    return make_device_memory_source(*runtime, state->topo, device);
  };
  assemble(options, std::move(m.topo), std::move(host), std::move(mapper),
           std::move(device_sources));
}

allocator::allocator(const alloc_options& options, topology topo,
                     std::unique_ptr<upstream_source> host, std::unique_ptr<gpu_mapper> mapper,
                     device_source_factory device_sources)
    : impl_(std::make_unique<impl>()) {
  assemble(options, std::move(topo), std::move(host), std::move(mapper),
           std::move(device_sources));
}

void allocator::assemble(const alloc_options& options, topology topo,
                         std::unique_ptr<upstream_source> host, std::unique_ptr<gpu_mapper> mapper,
                         device_source_factory device_sources) {
  if (!host || !mapper) throw_error(errc::invalid_argument, "allocator needs a source and a mapper");
  impl_->options = options;
  impl_->topo = std::move(topo);
  impl_->mapper = std::move(mapper);
  impl_->host = std::move(host);
  impl_->device_sources = std::move(device_sources);
  impl_->device_slots = std::vector<std::atomic<const impl::device_entry*>>(impl_->topo.gpus().size());
  impl_->visible = std::make_unique<gpu_visible_source>(*impl_->host, *impl_->mapper);
  impl_->limited = std::make_unique<limiting_source>(
      *impl_->visible, to_byte_limits(resolve_limits(options, impl_->topo.numa)));
  check_device_limits(options, impl_->topo);
  log().info("umem allocator: {}", describe());
}

allocator::~allocator() = default;

// The fast path stays small (no frame for the slow one's locals); the rest is impl's, out of
// line (Note [Fast front end]).
void* allocator::allocate(std::size_t bytes, const request& r) {
  if (r.where || r.kind || r.own_segment) return impl::allocate_slow(*this, bytes, r);
  auto slow = [&r](allocator& a, std::size_t n) { return impl::allocate_slow(a, n, r); };
  return impl::allocate_front(*this, bytes, slow, slow);
}

void* allocator::allocate(std::size_t bytes) {
  auto slow = [](allocator& a, std::size_t n) { return impl::allocate_slow(a, n); };
  return impl::allocate_front(*this, bytes, slow, slow);
}

void* allocator::allocate_cached(std::size_t bytes) {
  return impl::allocate_front(*this, bytes, impl::allocate_cached_slow,
                              [](allocator&, std::size_t) { return static_cast<void*>(nullptr); });
}

void* allocator::impl::allocate_slow(allocator& a, std::size_t bytes, const request& r) {
  impl& self = *a.impl_;
  if (!r.where && !r.kind) {
    // With policy_home set, allocate() asked its cache already.
    const bool asked = self.policy_home.load(std::memory_order_acquire) != nullptr;
    const route& route = self.default_route();
    if (!asked && !r.own_segment)
      if (void* p = route.home->allocate_cached(bytes)) return p;
    return a.allocate_from(*route.home, route.device_memory ? nullptr : &route.resolved,
                           route.kind, bytes, r);
  }
  const placement where = r.where.value_or(self.options.policy);
  if (where.kind == placement_kind::device)
    if (caching_pool* pool = self.device_for(where.index).pool.get())
      return a.allocate_from(*pool, nullptr, coherence::coarse, bytes, r);
  const coherence kind = r.kind.value_or(where.kind == placement_kind::device
                                             ? self.options.device_kind
                                             : self.options.kind);
  const resolved_placement resolved = resolve_placement(where, self.options.spill, self.topo);
  return a.allocate_from(self.pool_for(resolved.binding, kind), &resolved, kind, bytes, r);
}

// Note [Reclaim ladder] in reclaim_ladder.hpp: the one place a failed request climbs.
void* allocator::allocate_from(caching_pool& home, const resolved_placement* resolved,
                               coherence kind, std::size_t bytes, const request& r) {
  auto headroom = [&r] { return r.headroom ? r.headroom() : caching_pool::unbounded; };
  // The first attempt before the rungs exist: most requests end here.
  attempt_result first = home.try_allocate(bytes, headroom(), r.own_segment);
  if (first.p) return first.p;
  reclaim_rungs rungs;
  rungs.attempt = [&] { return home.try_allocate(bytes, headroom(), r.own_segment); };
  rungs.thread_caches = [this] { return impl_->flush_thread_caches(); };
  const reclaim_hooks& hooks = impl_->hooks;
  if (!hooks.may_reclaim || hooks.may_reclaim()) {
    rungs.stream_blocks = hooks.release_stream_blocks;
    rungs.trim = hooks.trim ? hooks.trim : std::function<std::size_t()>([this] { return trim(); });
  }
  rungs.retried = [&home] { home.count_retry(); };
  // Device memory never spills (Note [Device placements]).
  if (resolved && !resolved->spill_nodes.empty())
    rungs.spill = [&]() -> attempt_result {
      for (int node : resolved->spill_nodes) {
        attempt_result a = impl_->pool_for({bind_mode::bind, {node}}, kind)
                               .try_allocate(bytes, headroom(), r.own_segment);
        if (!a.p) continue;
        home.count_spill();
        if (impl_->options.spill == spill_policy::warn)
          log().warn("spilled {} bytes from {} to NUMA node {}: {} ran out", bytes,
                     pool_name(resolved->binding, kind), node, home.describe());
        return a;
      }
      return {nullptr, "spilling to nodes " + format_node_set(resolved->spill_nodes) +
                           " failed too"};
    };
  reclaim_report own;
  const attempt_result a = climb_after(std::move(first), rungs, r.report ? *r.report : own);
  if (a.p) return a.p;
  home.throw_out_of_memory(
      bytes, a.why, resolved ? "" : "discrete GPU memory (never spilled to host memory): ");
}

void allocator::set_reclaim_hooks(reclaim_hooks hooks) { impl_->hooks = std::move(hooks); }

void allocator::deallocate(void* p) {
  // No slab object starts at null (thread_cache's no_slab): it takes the way below.
  const std::uint64_t serial = impl_->newest_serial.load(std::memory_order_relaxed);
  if (caching_pool::put_slab_object(serial, p)) return;  // Note [Fast front end]
  impl::deallocate_above_slabs(*this, p);
}

void allocator::impl::deallocate_above_slabs(allocator& a, void* p) {
  if (p == nullptr) return;
  const impl::pool_entry* first = a.impl_->first_pool();
  if (first == nullptr) return impl::deallocate_slow(first, p);
  first->pool->deallocate_block_cached_or<last_used>(  // Note [Fast path]
      [&] { impl::deallocate_slow(first, p); },
      [&](thread_cache& mine) { impl::deallocate_block(first, mine, p); });
}

void allocator::impl::deallocate_slow(const pool_entry* first, void* p) {
  for (const pool_entry* e = first ? first->next : nullptr; e; e = e->next)
    if (e->pool->deallocate_cached(p)) return;
  for (const pool_entry* e = first; e; e = e->next)
    if (e->pool->deallocate_if_owned(p)) return;
  throw_error(errc::invalid_argument,
              "free of " + hex(p) +
                  ": this pointer was not allocated by this umem allocator (or its segment "
                  "was already returned after being freed)");
}

std::size_t allocator::allocation_size(const void* p) const {
  const impl::pool_entry* e = impl_->owner_entry(p);
  if (e == nullptr)
    throw_error(errc::invalid_argument, hex(p) + " was not allocated by this umem allocator");
  return e->pool->block_size(p);
}

memory_kind allocator::kind_of(const void* p) const {
  const impl::pool_entry* e = impl_->owner_entry(p);
  if (e == nullptr)
    throw_error(errc::invalid_argument, hex(p) + " was not allocated by this umem allocator");
  return e->device_memory ? memory_kind::device : memory_kind::host;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> allocator::device_memory_info(
    int device) const {
  const impl::device_entry& d = impl_->device_for(device);
  if (!d.source) return std::nullopt;
  return d.source->memory_info();
}

std::size_t allocator::trim() {
  std::shared_lock lock(impl_->pools_mutex);
  std::size_t released = 0;
  impl_->for_each_pool([&](const std::string&, caching_pool& pool) { released += pool.trim(); });
  return released;
}

std::map<std::string, std::int64_t> allocator::memory_stats() const {
  std::shared_lock lock(impl_->pools_mutex);
  std::vector<pool_stats> all;
  std::map<std::string, std::int64_t> out;
  impl_->for_each_pool([&](const std::string& name, const caching_pool& pool) {
    all.push_back(pool.stats());
    out.merge(to_flat_map(all.back(), name));
  });
  // One pool and no tracker: that pool is the total, peaks included (Note [Fast front end]).
  out.merge(to_flat_map(impl_->tracking || all.size() != 1 ? merge(all, impl_->peaks) : all[0],
                        "all"));
  return out;
}

std::string allocator::memory_stats_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : memory_stats()) j[key] = value;
  return j.dump(2);
}

void allocator::reset_peak_stats() {
  std::shared_lock lock(impl_->pools_mutex);
  impl_->for_each_pool([](const std::string&, caching_pool& pool) { pool.reset_peak_stats(); });
  impl_->peaks.reset_peak();
}

std::string allocator::memory_snapshot_json() const {
  std::shared_lock lock(impl_->pools_mutex);
  nlohmann::json pools = nlohmann::json::object();
  impl_->for_each_pool([&](const std::string& name, const caching_pool& pool) {
    pools[name] = nlohmann::json::parse(to_json(pool.snapshot()));
  });
  return pools.dump(2);
}

std::vector<pool_report> allocator::pool_reports(bool with_segments) const {
  std::shared_lock lock(impl_->pools_mutex);
  std::vector<pool_report> out;
  auto report = [&](const caching_pool& pool, int device) {
    out.push_back({pool.binding(), pool.kind(), device, pool.stats(),
                   with_segments ? pool.snapshot() : pool_snapshot{}});
  };
  for (const auto& [key, pool] : impl_->pools) report(*pool, -1);
  for (const impl::device_entry& d : impl_->devices)
    if (d.pool) report(*d.pool, d.device);
  return out;
}

residency_report allocator::residency(const void* p, std::size_t bytes) const {
  return query_residency(p, bytes, impl_->mapper.get());
}

bool allocator::gpu_accessible() const { return impl_->mapper->gpu_accessible(); }

std::shared_ptr<void> allocator::register_foreign(const void* p, std::size_t bytes) const {
  return impl_->mapper->register_foreign(p, bytes);
}

bool allocator::pins_foreign() const { return impl_->mapper->pins_foreign(); }

const topology& allocator::topo() const { return impl_->topo; }

const alloc_options& allocator::options() const { return impl_->options; }

std::string allocator::describe() const {
  std::string out = "memory: " + impl_->limited->describe();
  {
    std::shared_lock lock(impl_->pools_mutex);
    for (const impl::device_entry& d : impl_->devices)
      if (d.source) out += "\n" + device_pool_name(d.device) + ": " + d.source->describe();
  }
  return out + "\noptions: " + alloc::describe(impl_->options);
}

void* pmr_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment > 256)
    throw_error(errc::unsupported, "umem pmr_resource: alignment " + std::to_string(alignment) +
                                       " > 256 bytes is not supported");
  return alloc_.allocate(bytes, request_);
}

void pmr_resource::do_deallocate(void* p, std::size_t, std::size_t) { alloc_.deallocate(p); }

bool pmr_resource::do_is_equal(const std::pmr::memory_resource& other) const noexcept {
  const auto* o = dynamic_cast<const pmr_resource*>(&other);
  return o != nullptr && &o->alloc_ == &alloc_;
}

}  // namespace umem::alloc
