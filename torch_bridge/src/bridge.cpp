#include "umem/torch_bridge/bridge.hpp"

#include <numa.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "umem/allocator/gpu_mapper_factory.hpp"
#include "umem/allocator/host_numa_source.hpp"
#include "umem/allocator/live_machine.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/core/log.hpp"

namespace umem::torch_bridge {
namespace {

// Why memory not from umem cannot be given to the GPU, in the backend's terms.
std::string no_gpu_access_reason(const topology& topo) {
  const std::string& backend = topo.gpu_backend.name;
  if (backend == "rocr")
    return "XNACK is off (the GPU ISA says xnack-; HSA_XNACK=1 before the runtime starts turns it "
           "on), so a GPU touching memory that no runtime registered faults and the process aborts";
  if (backend == "cuda")
    return "the CUDA devices lack pageable memory access (no HMM/ATS), so only memory registered "
           "with the driver is GPU-accessible";
  return "no GPU runtime is in use (" +
         (topo.gpu_backend.reason.empty() ? std::string("no backend selected")
                                          : topo.gpu_backend.reason) +
         ")";
}

std::unique_ptr<alloc::allocator> live_allocator(const alloc::alloc_options& options,
                                                 alloc::live_machine& m) {
  // The same assembly as allocator(options), keeping the backend for its stream events.
  std::unique_ptr<hsa::rocr_library> rocr;
  if (m.rocr) rocr = std::make_unique<hsa::rocr_library>(std::move(*m.rocr));
  auto mapper = alloc::make_gpu_mapper(m.topo, rocr.get());
  auto host = std::make_unique<alloc::host_numa_source>(
      alloc::host_source_config{options.huge_pages, options.populate});
  return std::make_unique<alloc::allocator>(options, m.topo, std::move(host), std::move(mapper),
                                            std::move(rocr));
}

void add_stat(std::map<std::string, std::int64_t>& out, const std::string& metric,
              const alloc::stat& s) {
  out[metric + ".all.current"] = s.current;
  out[metric + ".all.peak"] = s.peak;
  out[metric + ".all.allocated"] = s.allocated;
  out[metric + ".all.freed"] = s.freed;
}

bool is_pool_of_node(std::string_view key, std::string_view metric, int node) {
  const std::string prefix = std::string(metric) + ".node" + std::to_string(node) + "_";
  if (key.substr(0, prefix.size()) != prefix) return false;
  // "<metric>.node<N>_<kind>.<field>": exactly one more dot (not a size-class key).
  return std::count(key.begin() + static_cast<std::ptrdiff_t>(prefix.size()), key.end(), '.') == 1;
}

}  // namespace

bridge::bridge(const alloc::alloc_options& options, event_factory events) {
  alloc::live_machine m = alloc::discover_live_machine();
  auto backend = m.backend;
  host_memory_gpu_accessible_ = backend->host_memory_gpu_accessible(m.topo);
  no_gpu_reason_ = no_gpu_access_reason(m.topo);
  alloc_ = live_allocator(options, m);
  if (!events && backend->has_stream_events())
    events = [backend](int device) { return backend->make_stream_event(device); };
  cache_ = std::make_unique<stream_ordered_cache>(std::move(events),
                                                  [this](void* p) { alloc_->deallocate(p); });
  log().info("umem torch bridge: backend {} ({}), stream events: {}", backend->name(),
             backend->reason(), backend->has_stream_events() ? "yes" : "no");
}

bridge::bridge(std::unique_ptr<alloc::allocator> a, event_factory events,
               bool host_memory_gpu_accessible, std::string no_gpu_reason)
    : alloc_(std::move(a)),
      host_memory_gpu_accessible_(host_memory_gpu_accessible),
      no_gpu_reason_(std::move(no_gpu_reason)) {
  cache_ = std::make_unique<stream_ordered_cache>(std::move(events),
                                                  [this](void* p) { alloc_->deallocate(p); });
}

bridge::~bridge() = default;

alloc::request bridge::request_for(int device) const {
  alloc::request r;
  // Without GPUs in the model (a CPU-only node) there is no device to be local to: the
  // configured placement applies, as for host allocations.
  if (device >= 0 && !alloc_->topo().gpus().empty())
    r.where = alloc::placement{alloc::placement_kind::device, device, {}};
  return r;
}

int bridge::node_of_device(int device) const {
  const alloc::request r = request_for(device);
  const auto resolved = alloc::resolve_placement(r.where.value_or(alloc_->options().policy),
                                                 alloc_->options().spill, alloc_->topo());
  return resolved.binding.nodes.empty() ? 0 : resolved.binding.nodes.front();
}

void bridge::account_allocate(int device, std::size_t usable, std::size_t requested) {
  for (usage* u : {&usage_[device], &total_}) {
    u->allocated.increase(static_cast<std::int64_t>(usable));
    u->requested.increase(static_cast<std::int64_t>(requested));
    u->allocation.increase(1);
  }
}

void bridge::account_free(int device, std::size_t usable) {
  for (usage* u : {&usage_[device], &total_}) {
    u->allocated.decrease(static_cast<std::int64_t>(usable));
    u->allocation.decrease(1);
  }
}

void* bridge::allocate_with_retry(std::size_t bytes, const alloc::request& r, usage& u,
                                  int device) {
  try {
    return alloc_->allocate(bytes, r);
  } catch (const error& e) {
    if (e.code() != errc::out_of_memory) throw;
    // Like PyTorch's caching allocator: wait for the streams that still use freed blocks, give
    // everything cached back, and try once more.
    {
      std::lock_guard lock(mutex_);
      ++u.num_alloc_retries;
      ++total_.num_alloc_retries;
    }
    cache_->release_all(false);
    alloc_->trim();
    try {
      return alloc_->allocate(bytes, r);
    } catch (const error& again) {
      if (again.code() != errc::out_of_memory) throw;
      std::lock_guard lock(mutex_);
      ++u.num_ooms;
      ++total_.num_ooms;
      throw_error(errc::out_of_memory,
                  "umem: out of memory allocating " + std::to_string(bytes) + " bytes for " +
                      (device >= 0 ? "device " + std::to_string(device) : std::string("the host")) +
                      " (NUMA node " + std::to_string(node_of_device(device)) + ", " +
                      std::to_string(u.allocated.current) + " bytes allocated there by PyTorch, " +
                      std::to_string(cache_->held_bytes(device)) +
                      " bytes waiting on streams): " + again.what());
    }
  }
}

void* bridge::allocate(std::size_t bytes, int device, void* stream) {
  if (bytes == 0) throw_error(errc::invalid_argument, "umem torch bridge: allocation of 0 bytes");
  usage* u = nullptr;
  {
    std::lock_guard lock(mutex_);
    u = &usage_[device];
    if (u->cap_bytes && static_cast<std::uint64_t>(u->allocated.current) + bytes > *u->cap_bytes) {
      ++u->num_ooms;
      ++total_.num_ooms;
      throw_error(errc::out_of_memory,
                  "umem: out of memory allocating " + std::to_string(bytes) + " bytes for device " +
                      std::to_string(device) + ": the memory fraction caps it at " +
                      std::to_string(*u->cap_bytes) + " bytes and " +
                      std::to_string(u->allocated.current) +
                      " are allocated (torch.cuda.set_per_process_memory_fraction / "
                      "umem.torch.set_memory_fraction)");
    }
  }
  auto [reused, usable] = cache_->reuse(bytes, device, stream);
  void* p = reused;
  if (p == nullptr) {
    cache_->release_completed();
    p = allocate_with_retry(bytes, request_for(device), *u, device);
    usable = alloc_->allocation_size(p);
  }
  std::lock_guard lock(mutex_);
  if (reused != nullptr) {
    ++u->stream_reuses;
    ++total_.stream_reuses;
  }
  account_allocate(device, usable, bytes);
  requested_[p] = bytes;
  return p;
}

void bridge::deallocate(void* p, int device, void* stream) {
  if (p == nullptr) return;
  const std::size_t usable = alloc_->allocation_size(p);  // throws for a foreign pointer
  {
    std::lock_guard lock(mutex_);
    auto it = requested_.find(p);
    if (it == requested_.end())
      throw_error(errc::invalid_argument,
                  "umem torch bridge: free of a pointer that is not a live allocation");
    for (usage* u : {&usage_[device], &total_})
      u->requested.decrease(static_cast<std::int64_t>(it->second));
    requested_.erase(it);
    account_free(device, usable);
  }
  if (device < 0)
    alloc_->deallocate(p);
  else
    cache_->deallocate(p, usable, device, stream);
}

void* bridge::allocate_host(std::size_t bytes, int node) {
  alloc::request r;
  if (node >= 0) r.where = alloc::placement{alloc::placement_kind::node, node, {}};
  usage* u = nullptr;
  {
    std::lock_guard lock(mutex_);
    u = &usage_[-1];
  }
  void* p = allocate_with_retry(bytes, r, *u, -1);
  std::lock_guard lock(mutex_);
  account_allocate(-1, alloc_->allocation_size(p), bytes);
  requested_[p] = bytes;
  return p;
}

void bridge::deallocate_host(void* p) { deallocate(p, -1, nullptr); }

std::size_t bridge::empty_cache(bool device_synchronized) {
  cache_->release_all(device_synchronized);
  return alloc_->trim();
}

void bridge::set_memory_fraction(double fraction, int device) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw_error(errc::invalid_argument, "memory fraction " + std::to_string(fraction) +
                                            " is not in [0, 1] (0 removes the cap)");
  const int node = node_of_device(device);
  const numa_node* n = alloc_->topo().find_numa_node(node);
  if (n == nullptr || n->memory_total_bytes == 0)
    throw_error(errc::invalid_argument, "memory fraction for device " + std::to_string(device) +
                                            ": the size of NUMA node " + std::to_string(node) +
                                            " is unknown");
  std::lock_guard lock(mutex_);
  if (fraction == 0.0)
    usage_[device].cap_bytes.reset();
  else
    usage_[device].cap_bytes =
        static_cast<std::uint64_t>(fraction * static_cast<double>(n->memory_total_bytes));
}

std::pair<std::uint64_t, std::uint64_t> bridge::mem_get_info(int device) const {
  const int node = node_of_device(device);
  long long os_free = 0;
  const long long os_total = numa_node_size64(node, &os_free);
  if (os_total < 0)
    throw_error(errc::unsupported, "mem_get_info: the kernel reports no memory for NUMA node " +
                                       std::to_string(node) + " (numa_node_size64 failed)");
  // Cached but unused bytes of the node's pools are free for PyTorch too.
  std::int64_t cached = static_cast<std::int64_t>(cache_->held_bytes(device));
  for (const auto& [key, value] : alloc_->memory_stats()) {
    if (is_pool_of_node(key, "reserved_bytes", node) && key.ends_with(".current")) cached += value;
    if (is_pool_of_node(key, "allocated_bytes", node) && key.ends_with(".current")) cached -= value;
  }
  std::uint64_t free_bytes = static_cast<std::uint64_t>(os_free) +
                             static_cast<std::uint64_t>(std::max<std::int64_t>(cached, 0));
  std::uint64_t total = static_cast<std::uint64_t>(os_total);
  std::lock_guard lock(mutex_);
  if (auto it = usage_.find(device); it != usage_.end() && it->second.cap_bytes) {
    total = std::min(total, *it->second.cap_bytes);
    const auto used = static_cast<std::uint64_t>(it->second.allocated.current);
    free_bytes = std::min(free_bytes, total > used ? total - used : 0);
  }
  return {std::min(free_bytes, total), total};
}

std::map<std::string, std::int64_t> bridge::memory_stats(int device) const {
  std::map<std::string, std::int64_t> out;
  const std::map<std::string, std::int64_t> pools = alloc_->memory_stats();
  std::lock_guard lock(mutex_);
  usage none;
  const usage* u = &total_;
  if (device >= 0) {
    auto it = usage_.find(device);
    u = it == usage_.end() ? &none : &it->second;
  }
  add_stat(out, "allocated_bytes", u->allocated);
  add_stat(out, "requested_bytes", u->requested);
  add_stat(out, "allocation", u->allocation);
  // PyTorch counts blocks whose streams are still running as active.
  const auto held = static_cast<std::int64_t>(cache_->held_bytes(device));
  alloc::stat active = u->allocated;
  active.current += held;
  active.peak = std::max(active.peak, active.current);
  add_stat(out, "active_bytes", active);
  out["num_ooms"] = u->num_ooms;
  out["num_alloc_retries"] = u->num_alloc_retries;
  out["umem.stream_reuses"] = u->stream_reuses;
  out["umem.held_for_streams_bytes"] = held;
  out["umem.limit_bytes"] = u->cap_bytes ? static_cast<std::int64_t>(*u->cap_bytes) : -1;
  if (device >= 0) {
    // The device's memory is its NUMA node's pools: umem's segments there are what is reserved.
    const int node = node_of_device(device);
    out["umem.numa_node"] = node;
    std::int64_t cur = 0, peak = 0;
    for (const auto& [key, value] : pools) {
      if (!is_pool_of_node(key, "reserved_bytes", node)) continue;
      if (key.ends_with(".current")) cur += value;
      if (key.ends_with(".peak")) peak += value;
    }
    out["reserved_bytes.all.current"] = cur;
    out["reserved_bytes.all.peak"] = peak;
  } else {
    out["reserved_bytes.all.current"] = pools.count("reserved_bytes.all.current")
                                            ? pools.at("reserved_bytes.all.current") : 0;
    out["reserved_bytes.all.peak"] =
        pools.count("reserved_bytes.all.peak") ? pools.at("reserved_bytes.all.peak") : 0;
  }
  return out;
}

void bridge::reset_peak_stats(int device) {
  std::lock_guard lock(mutex_);
  auto reset = [](usage& u) {
    for (alloc::stat* s : {&u.allocated, &u.requested, &u.allocation}) s->peak = s->current;
  };
  if (device >= 0) {
    reset(usage_[device]);
    return;
  }
  for (auto& [d, u] : usage_) reset(u);
  reset(total_);
  alloc_->reset_peak_stats();
}

gpu_access bridge::access(const void* p, std::size_t bytes) const {
  gpu_access a;
  try {
    a.umem_memory = alloc_->allocation_size(p) >= bytes;
  } catch (const error&) {
    a.umem_memory = false;
  }
  if (a.umem_memory) {
    a.accessible = alloc_->gpu_accessible();
    a.reason = a.accessible ? "umem memory, made GPU-accessible by the allocator's GPU mapper"
                            : "umem memory, but it is host-only: " + no_gpu_reason_;
  } else if (host_memory_gpu_accessible_) {
    a.accessible = true;
    a.reason = "not umem memory, but every GPU here can access host memory (XNACK on or "
               "pageable memory access)";
  } else {
    a.reason = "not memory of umem's allocator (PyTorch's own allocator made it), and " +
               no_gpu_reason_ + "; allocate it with umem.torch.empty(...) instead";
  }
  return a;
}

std::string bridge::describe() const {
  return alloc_->describe() + "\nhost memory GPU-accessible without umem: " +
         (host_memory_gpu_accessible_ ? "yes" : "no (" + no_gpu_reason_ + ")");
}

}  // namespace umem::torch_bridge
