#include "umem/allocator/allocator.hpp"

#include <array>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <tuple>
#include <vector>

#include "umem/allocator/caching_pool.hpp"
#include "umem/allocator/gpu_mapper_factory.hpp"
#include "umem/allocator/gpu_visible_source.hpp"
#include "umem/allocator/host_numa_source.hpp"
#include "umem/allocator/limiting_source.hpp"
#include "umem/allocator/live_machine.hpp"
#include "umem/allocator/os_memory.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/core/log.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {
namespace {

using pool_key = std::tuple<int, std::vector<int>, int>;  // bind mode, nodes, coherence

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
  std::string k = to_string(kind);
  for (char& c : k)
    if (c == '-') c = '_';
  return name + "_" + k;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIxPTR, reinterpret_cast<std::uintptr_t>(p));
  return buf;
}

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
// (caching_pool.hpp, Note [Fast path]). deallocate() offers the pointer to the calling thread's
// cache of each pool, then finds the owning pool through an append-only list of pools (pools live
// as long as the allocator), read without locks, and frees in the same pool lock that decides
// ownership. With one pool, no global_peak_tracker is fed: that
// pool's peaks are the total's (Note [Merged peaks]); the second pool attaches the first.
struct allocator::impl {
  struct route {
    caching_pool* home = nullptr;
    resolved_placement resolved;
  };
  struct pool_entry {
    caching_pool* pool = nullptr;
    const pool_entry* next = nullptr;
  };
  static constexpr std::size_t max_cached_local_nodes = 64;

  alloc_options options;
  topology topo;
  // Declaration order is destruction order reversed: pools go first (returning segments through
  // the sources), then the sources, the mapper, and last the runtime library the mapper uses.
  std::unique_ptr<hsa::rocr_library> rocr;
  std::unique_ptr<gpu_mapper> mapper;
  std::unique_ptr<upstream_source> host;
  std::unique_ptr<gpu_visible_source> visible;
  std::unique_ptr<limiting_source> limited;
  global_peak_tracker peaks;
  mutable std::shared_mutex pools_mutex;  // guards the containers below, not the pools
  std::map<pool_key, std::unique_ptr<caching_pool>> pools;
  bool tracking = false;  // the pools report to `peaks` (two pools or more)
  std::deque<pool_entry> entries;
  std::deque<route> routes;
  std::atomic<const pool_entry*> owners{nullptr};  // newest pool first
  std::atomic<const route*> policy_route{nullptr};  // for a policy other than `local`
  std::array<std::atomic<const route*>, max_cached_local_nodes> local_routes{};  // by node

  caching_pool& pool_for(const node_binding& b, coherence kind) {
    const pool_key key = key_of(b, kind);
    {
      std::shared_lock lock(pools_mutex);
      if (auto it = pools.find(key); it != pools.end()) return *it->second;
    }
    std::unique_lock lock(pools_mutex);
    if (auto it = pools.find(key); it != pools.end()) return *it->second;
    if (pools.size() == 1 && !tracking) {
      pools.begin()->second->attach_global(peaks);
      tracking = true;
    }
    pool_config cfg;
    cfg.max_cached_bytes = options.max_cached;
    cfg.thread_cache_bytes = options.thread_cache;
    cfg.expandable_segments = options.expandable_segments;
    auto pool = std::make_unique<caching_pool>(*limited, b, kind, cfg,
                                               pools.empty() ? nullptr : &peaks);
    entries.push_back(pool_entry{pool.get(), owners.load(std::memory_order_relaxed)});
    caching_pool& out = *pool;
    pools.emplace(key, std::move(pool));
    owners.store(&entries.back(), std::memory_order_release);
    log().debug("new pool {}", pool_name(b, kind));
    return out;
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
    fresh.resolved = where.kind == placement_kind::local
                         ? resolve_placement(where, options.spill, topo, node)
                         : resolve_placement(where, options.spill, topo);
    fresh.home = &pool_for(fresh.resolved.binding, options.kind);
    std::unique_lock lock(pools_mutex);
    if (slot)
      if (const route* r = slot->load(std::memory_order_acquire)) return *r;
    routes.push_back(std::move(fresh));
    if (slot) slot->store(&routes.back(), std::memory_order_release);
    return routes.back();
  }

  const pool_entry* first_pool() const { return owners.load(std::memory_order_acquire); }

  caching_pool* owner_of(const void* p) const {
    for (const pool_entry* e = first_pool(); e; e = e->next)
      if (e->pool->owns(p)) return e->pool;
    return nullptr;
  }
};

allocator::allocator(const alloc_options& options) : impl_(std::make_unique<impl>()) {
  live_machine m = discover_live_machine();
  std::unique_ptr<hsa::rocr_library> rocr;
  if (m.rocr) rocr = std::make_unique<hsa::rocr_library>(std::move(*m.rocr));
  auto mapper = make_gpu_mapper(m.topo, rocr.get());
  auto host = std::make_unique<host_numa_source>(host_source_config{options.huge_pages,
                                                                    options.populate});
  assemble(options, std::move(m.topo), std::move(host), std::move(mapper), std::move(rocr));
}

allocator::allocator(const alloc_options& options, topology topo,
                     std::unique_ptr<upstream_source> host, std::unique_ptr<gpu_mapper> mapper,
                     std::unique_ptr<hsa::rocr_library> rocr)
    : impl_(std::make_unique<impl>()) {
  assemble(options, std::move(topo), std::move(host), std::move(mapper), std::move(rocr));
}

void allocator::assemble(const alloc_options& options, topology topo,
                         std::unique_ptr<upstream_source> host, std::unique_ptr<gpu_mapper> mapper,
                         std::unique_ptr<hsa::rocr_library> rocr) {
  if (!host || !mapper) throw_error(errc::invalid_argument, "allocator needs a source and a mapper");
  impl_->options = options;
  impl_->topo = std::move(topo);
  impl_->rocr = std::move(rocr);
  impl_->mapper = std::move(mapper);
  impl_->host = std::move(host);
  impl_->visible = std::make_unique<gpu_visible_source>(*impl_->host, *impl_->mapper);
  impl_->limited = std::make_unique<limiting_source>(
      *impl_->visible, to_byte_limits(resolve_limits(options, impl_->topo.numa)));
  log().info("umem allocator: {}", describe());
}

allocator::~allocator() = default;

void* allocator::allocate(std::size_t bytes, const request& r) {
  if (!r.where && !r.kind) {
    const impl::route& route = impl_->default_route();
    if (void* p = route.home->allocate_cached(bytes)) return p;  // Note [Fast path]
    return allocate_from(*route.home, route.resolved, impl_->options.kind, bytes);
  }
  const placement where = r.where.value_or(impl_->options.policy);
  const coherence kind = r.kind.value_or(impl_->options.kind);
  const resolved_placement resolved = resolve_placement(where, impl_->options.spill, impl_->topo);
  return allocate_from(impl_->pool_for(resolved.binding, kind), resolved, kind, bytes);
}

void* allocator::allocate_from(caching_pool& home, const resolved_placement& resolved,
                               coherence kind, std::size_t bytes) {
  try {
    try {
      return home.allocate(bytes);
    } catch (const error& e) {
      // The pool already trimmed itself and retried; a limit may still be held by other pools'
      // caches, so release those too and retry once more.
      if (e.code() != errc::out_of_memory || trim() == 0) throw;
      return home.allocate(bytes);
    }
  } catch (const error& e) {
    if (e.code() != errc::out_of_memory || resolved.spill_nodes.empty()) throw;
    // Spill: the nearest nodes by distance, in order (spill policy warn/allow).
    for (int node : resolved.spill_nodes) {
      try {
        void* p = impl_->pool_for({bind_mode::bind, {node}}, kind).allocate(bytes);
        home.count_spill();
        if (impl_->options.spill == spill_policy::warn)
          log().warn("spilled {} bytes from {} to NUMA node {}: {}", bytes,
                     pool_name(resolved.binding, kind), node, e.what());
        return p;
      } catch (const error& spill_error) {
        if (spill_error.code() != errc::out_of_memory) throw;
      }
    }
    throw_error(errc::out_of_memory,
                std::string(e.what()) + "; spilling to nodes " +
                    format_node_set(resolved.spill_nodes) + " failed too");
  }
}

void allocator::deallocate(void* p) {
  if (p == nullptr) return;
  const impl::pool_entry* first = impl_->first_pool();
  for (const impl::pool_entry* e = first; e; e = e->next)
    if (e->pool->deallocate_cached(p)) return;  // Note [Fast path]
  for (const impl::pool_entry* e = first; e; e = e->next)
    if (e->pool->deallocate_if_owned(p)) return;
  throw_error(errc::invalid_argument,
              "free of " + hex(p) +
                  ": this pointer was not allocated by this umem allocator (or its segment "
                  "was already returned after being freed)");
}

std::size_t allocator::allocation_size(const void* p) const {
  caching_pool* pool = impl_->owner_of(p);
  if (pool == nullptr)
    throw_error(errc::invalid_argument, hex(p) + " was not allocated by this umem allocator");
  return pool->block_size(p);
}

std::size_t allocator::trim() {
  std::shared_lock lock(impl_->pools_mutex);
  std::size_t released = 0;
  for (const auto& [key, pool] : impl_->pools) released += pool->trim();
  return released;
}

std::map<std::string, std::int64_t> allocator::memory_stats() const {
  std::shared_lock lock(impl_->pools_mutex);
  std::vector<pool_stats> all;
  std::map<std::string, std::int64_t> out;
  for (const auto& [key, pool] : impl_->pools) {
    all.push_back(pool->stats());
    out.merge(to_flat_map(all.back(), pool_name(pool->binding(), pool->kind())));
  }
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
  for (const auto& [key, pool] : impl_->pools) pool->reset_peak_stats();
  impl_->peaks.reset_peak();
}

std::string allocator::memory_snapshot_json() const {
  std::shared_lock lock(impl_->pools_mutex);
  nlohmann::json pools = nlohmann::json::object();
  for (const auto& [key, pool] : impl_->pools)
    pools[pool_name(pool->binding(), pool->kind())] = nlohmann::json::parse(to_json(pool->snapshot()));
  return pools.dump(2);
}

std::vector<pool_report> allocator::pool_reports(bool with_segments) const {
  std::shared_lock lock(impl_->pools_mutex);
  std::vector<pool_report> out;
  for (const auto& [key, pool] : impl_->pools)
    out.push_back({pool->binding(), pool->kind(), pool->stats(),
                   with_segments ? pool->snapshot() : pool_snapshot{}});
  return out;
}

residency_report allocator::residency(const void* p, std::size_t bytes) const {
  return query_residency(p, bytes, impl_->mapper.get());
}

bool allocator::gpu_accessible() const { return impl_->mapper->gpu_accessible(); }

const topology& allocator::topo() const { return impl_->topo; }

const alloc_options& allocator::options() const { return impl_->options; }

std::string allocator::describe() const {
  return "memory: " + impl_->limited->describe() + "\noptions: " + alloc::describe(impl_->options);
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
