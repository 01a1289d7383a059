#include "umem/torch_bridge/bridge.hpp"

#include <algorithm>
#include <cstdio>
#include <span>
#include <tuple>

#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/machine/gpu_runtime_kind.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/numa/memory_policy.hpp"

namespace umem::torch_bridge {
namespace {

// Why memory not from umem cannot be given to the GPU, in the backend's terms.
std::string no_gpu_access_reason(const topology& topo) {
  const machine::gpu_runtime_kind runtime = machine::selected_gpu_runtime(topo);
  if (runtime == machine::gpu_runtime_kind::rocr)
    return "XNACK is off (the GPU ISA says xnack-; HSA_XNACK=1 before the runtime starts turns it "
           "on), so a GPU touching memory that no runtime registered faults and the process aborts";
  if (runtime == machine::gpu_runtime_kind::cuda)
    return "the CUDA devices lack pageable memory access (no HMM/ATS), so only memory registered "
           "with the driver is GPU-accessible";
  return "no GPU runtime is in use (" +
         (topo.gpu_backend.reason.empty() ? std::string("no backend selected")
                                          : topo.gpu_backend.reason) +
         ")";
}

// Note [Call trace] in bridge.hpp. Initial-exec, like the allocator's t_last_cache
// (thread_cache_registry.hpp): each access is an %fs-relative store, not a __tls_get_addr call.
[[gnu::tls_model("initial-exec")]] thread_local call_trace this_call;

// Note [Sizes PyTorch sees] in bridge.hpp.
std::size_t pytorch_size(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + 511) & ~std::size_t{511};
}

std::size_t class_of(std::size_t reported) {
  return static_cast<std::size_t>(reported <= small_pool_limit ? alloc::size_class::small_pool
                                                          : alloc::size_class::large_pool);
}

void add(device_stats::by_class& s, std::size_t cls, std::int64_t n) {
  s[0].increase(n);
  s[cls].increase(n);
}

void sub(device_stats::by_class& s, std::size_t cls, std::int64_t n) {
  s[0].decrease(n);
  s[cls].decrease(n);
}

void reset_peaks(device_stats::by_class& s) {
  for (alloc::stat& x : s) x.peak = x.current;
}

void reset_accumulated(device_stats::by_class& s) {
  for (alloc::stat& x : s) x.allocated = x.freed = 0;
}

// PyTorch's way of writing a size in its messages ("800000000.00 GiB").
std::string format_size(std::uint64_t bytes) {
  char buf[64];
  const auto b = static_cast<double>(bytes);
  if (bytes <= 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes <= (std::uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  else if (bytes <= (std::uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1073741824.0);
  return buf;
}

std::uintptr_t key_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

bool bound_to(const alloc::node_binding& b, int node) {
  return b.mode == alloc::bind_mode::bind && b.nodes.size() == 1 && b.nodes.front() == node;
}

// The pools holding a device's memory: its own (a discrete GPU), else those of its NUMA node.
bool holds_device_memory(const alloc::pool_report& r, int device, bool discrete, int node) {
  return discrete ? r.device == device : r.device < 0 && bound_to(r.binding, node);
}

}  // namespace

const call_trace& last_call_trace() noexcept { return this_call; }

bridge::bridge(const alloc::alloc_options& options, event_factory events) {
  machine::live_machine m = machine::discover_live_machine();
  auto backend = m.runtime;
  host_memory_gpu_accessible_ = backend->host_memory_gpu_accessible(m.topo);
  no_gpu_reason_ = no_gpu_access_reason(m.topo);
  alloc_ = std::make_unique<alloc::allocator>(options, std::move(m));
  if (!events && backend->has_stream_events())
    events = [backend](int device) { return backend->make_stream_event(device); };
  attach(std::move(events));
  log().info("umem torch bridge: backend {} ({}), stream events: {}", to_string(backend->kind()),
             backend->reason(), backend->has_stream_events() ? "yes" : "no");
}

bridge::bridge(std::unique_ptr<alloc::allocator> a, event_factory events,
               bool host_memory_gpu_accessible, std::string no_gpu_reason)
    : alloc_(std::move(a)),
      host_memory_gpu_accessible_(host_memory_gpu_accessible),
      no_gpu_reason_(std::move(no_gpu_reason)) {
  attach(std::move(events));
}

void bridge::remember(void* p, live_block l) {
  static_assert(sizeof(live_block) == 32, "two live blocks per cache line (bridge.hpp)");
  const std::size_t slots = live_.capacity();
  live_.insert(key_of(p), std::move(l));
  this_call.live_rehash = live_.capacity() != slots;
}

void bridge::attach(event_factory events) {
  // Which GPUs are discrete is asked on each one's first allocation (sole_candidate): asking
  // creates the device's memory source, a driver context on every visible GPU if done here.
  if (events && alloc_->options().max_cached == 0)
    sole_kinds_ = std::vector<std::atomic<signed char>>(alloc_->topo().gpus().size());
  cache_ = std::make_unique<stream_ordered_cache>(
      std::move(events), [this](const held_block& b, bool shared) { released(b, shared); });
  // The ladder's second rung and its trim are this bridge's (Note [Reclaim ladder] in
  // reclaim_ladder.hpp); like PyTorch's caching allocator, neither waits for streams nor trims
  // during a graph capture.
  alloc_->set_reclaim_hooks({[this] { return release_held(false); },
                             [this] { return captures_.load() == 0; },
                             [this] { return trim(false); }});
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

bool bridge::device_memory_is_host(int device) const {
  return !alloc_->device_memory_info(device).has_value();
}

void bridge::count_allocate(usage& u, std::size_t reported, std::size_t requested, bool reused) {
  const std::size_t cls = class_of(reported);
  add(u.allocated, cls, static_cast<std::int64_t>(reported));
  add(u.requested, cls, static_cast<std::int64_t>(requested));
  add(u.allocation, cls, 1);
  add(u.active_bytes, cls, static_cast<std::int64_t>(reported));
  add(u.active, cls, 1);
  if (reused) ++u.stream_reuses;
}

void bridge::count_free(usage& u, std::size_t reported, std::size_t requested, bool active) {
  const std::size_t cls = class_of(reported);
  sub(u.allocated, cls, static_cast<std::int64_t>(reported));
  sub(u.requested, cls, static_cast<std::int64_t>(requested));
  sub(u.allocation, cls, 1);
  if (!active) return;
  sub(u.active_bytes, cls, static_cast<std::int64_t>(reported));
  sub(u.active, cls, 1);
}

bridge::host_shard& bridge::shard_of(const void* p) const {
  // Fibonacci hashing: the top bits of the product mix every bit of the address.
  const std::uint64_t h = std::uint64_t{key_of(p)} * 0x9e3779b97f4a7c15ULL;
  return host_shards_[h >> (64 - host_shard_bits)];
}

void bridge::released(const held_block& b, bool shared) {
  ++this_call.released;
  alloc_->deallocate(b.p);
  if (!shared || b.host) return;  // inactive since its free (Note [Blocks used on several streams])
  for (usage* u : {&usage_[b.device], &total_}) {
    sub(u->active_bytes, class_of(b.size), static_cast<std::int64_t>(b.size));
    sub(u->active, class_of(b.size), 1);
  }
}

bool bridge::sole_candidate(int device) {
  if (device < 0 || static_cast<std::size_t>(device) >= sole_kinds_.size()) return false;
  std::atomic<signed char>& kind = sole_kinds_[static_cast<std::size_t>(device)];
  signed char k = kind.load(std::memory_order_relaxed);
  if (k == 0) {
    k = discrete(device) ? 1 : 2;
    kind.store(k, std::memory_order_relaxed);
  }
  return k == 1;
}

bool bridge::discrete(int device) const {
  return device >= 0 && !alloc_->topo().gpus().empty() &&
         alloc_->device_memory_info(device).has_value();
}

std::pair<std::int64_t, std::int64_t> bridge::reserved_of(int device, bool own) const {
  const int node = node_of_device(device);
  std::int64_t reserved = 0, allocated = 0;
  for (const alloc::pool_report& r : alloc_->pool_reports(false)) {
    if (!holds_device_memory(r, device, own, node)) continue;
    reserved += r.stats(alloc::metric::reserved_bytes, alloc::size_class::all).current;
    allocated += r.stats(alloc::metric::allocated_bytes, alloc::size_class::all).current;
  }
  return {reserved, allocated};
}

void bridge::throw_oom(std::size_t bytes, int device, const std::string& detail) {
  if (device < 0) {
    host_stats_.out_of_memory();
  } else {
    std::lock_guard lock(mutex_);
    ++usage_[device].num_ooms;
    ++total_.num_ooms;
  }
  if (device < 0)
    throw_error(errc::out_of_memory, "umem: out of memory allocating " + std::to_string(bytes) +
                                         " bytes for the host: " + detail);
  std::uint64_t free_bytes = 0, total = 0;
  try {
    std::tie(free_bytes, total) = capacity(device);  // the cap is reported as "allowed"
  } catch (const error&) {
    // The message still says what was asked for; capacity is unknown here.
  }
  const auto [reserved, pool_allocated] = reserved_of(device, discrete(device));
  std::int64_t allocated = 0;
  std::size_t held = 0;
  std::string allowed;
  {
    std::lock_guard lock(mutex_);
    held = cache_->held_bytes(device);
    const usage& u = usage_[device];
    allocated = u.allocated[0].current;
    if (u.cap_bytes) allowed = format_size(*u.cap_bytes) + " allowed; ";
  }
  const auto unused = static_cast<std::uint64_t>(std::max<std::int64_t>(reserved - pool_allocated, 0));
  // PyTorch's own words, HIP's on ROCm builds (the backend tells which runtime PyTorch uses).
  const char* vendor =
      machine::selected_gpu_runtime(alloc_->topo()) == machine::gpu_runtime_kind::rocr ? "HIP"
                                                                                        : "CUDA";
  throw_error(errc::out_of_memory,
              std::string(vendor) + " out of memory. Tried to allocate " +
                  format_size(pytorch_size(bytes)) + ". GPU " +
                  std::to_string(device) + " has a total capacity of " + format_size(total) +
                  " of which " + format_size(free_bytes) + " is free. " + allowed +
                  "Of the allocated memory " +
                  format_size(static_cast<std::uint64_t>(allocated)) +
                  " is allocated by PyTorch, and " + format_size(unused) +
                  " is reserved by PyTorch but unallocated. umem: NUMA node " +
                  std::to_string(node_of_device(device)) + ", " +
                  std::to_string(held) + " bytes waiting on streams; " +
                  detail);
}

void* bridge::allocate_capped(std::size_t bytes, alloc::request r, int device,
                              std::optional<std::uint64_t> cap) {
  // Note [Memory fraction]: what the cap leaves is the most each attempt of the ladder may add to
  // what is reserved (Note [Headroom] in caching_pool.hpp), so a refused request reserves nothing.
  std::int64_t reserved = 0;
  if (cap)
    r.headroom = [&] {
      reserved = reserved_for_cap(device);
      const auto limit = static_cast<std::int64_t>(*cap);
      return limit > reserved ? static_cast<std::size_t>(limit - reserved) : std::size_t{0};
    };
  alloc::reclaim_report report;
  r.report = &report;
  auto count_retries = [&] {
    if (report.retries == 0) return;
    if (device < 0) {
      host_stats_.retried(report.retries);
      return;
    }
    std::lock_guard lock(mutex_);
    usage_[device].num_alloc_retries += report.retries;
    total_.num_alloc_retries += report.retries;
  };
  try {
    void* p = alloc_->allocate(bytes, r);
    count_retries();
    return p;
  } catch (const error& e) {
    count_retries();
    if (e.code() != errc::out_of_memory) throw;
    throw_oom(bytes, device,
              cap ? "the memory fraction caps device " + std::to_string(device) + " at " +
                        std::to_string(*cap) +
                        " bytes reserved (torch.cuda.set_per_process_memory_fraction), " +
                        std::to_string(reserved) +
                        " are reserved, even after the cache was given back: " + e.what()
                  : std::string(e.what()));
  }
}

std::int64_t bridge::reserved_for_cap(int device) const {
  const std::int64_t pools = reserved_of(device, discrete(device)).first;
  std::lock_guard lock(mutex_);
  auto it = usage_.find(device);
  if (it == usage_.end()) return pools;
  return pools - it->second.lent_bytes + it->second.external_bytes;
}

void* bridge::allocate(std::size_t bytes, int device, void* stream) {
  if (bytes == 0) throw_error(errc::invalid_argument, "umem torch bridge: allocation of 0 bytes");
  if (bytes >= one_exabyte)
    throw_error(errc::out_of_memory,
                std::string(machine::selected_gpu_runtime(alloc_->topo()) ==
                                    machine::gpu_runtime_kind::rocr
                                ? "HIP"
                                : "CUDA") +
                    " out of memory. Tried to allocate more than 1EB memory.");
  const std::size_t reported = pytorch_size(bytes);
  std::optional<std::uint64_t> cap;
  this_call = {};
  bool own_segment = false;
  // Outside mutex_: the first answer for a device creates its memory source, driver calls that
  // other threads' mallocs and frees need not wait for.
  const bool candidate = sole_candidate(device);
  {
    // Note [One lock]: a block freed on this stream is the whole malloc under one lock.
    std::lock_guard lock(mutex_);
    ++this_call.locks;
    if (device >= 0)
      if (const auto reused = cache_->reuse(reported, device, stream)) {
        this_call.stream_cache = true;
        for (usage* u : {&usage_[device], &total_}) count_allocate(*u, reported, bytes, true);
        remember(reused->p, live_block{bytes, stream, nullptr, device});
        return reused->p;
      }
    if (captures_.load() == 0 && !cache_->empty()) {
      this_call.release_scan = true;
      cache_->release_completed();
    }
    own_segment = candidate && !admit_stream(device, stream);
    if (capped_devices_.load(std::memory_order_relaxed) != 0)
      if (auto it = usage_.find(device); it != usage_.end()) cap = it->second.cap_bytes;
  }
  this_call.allocator = true;
  alloc::request r = request_for(device);
  r.own_segment = own_segment;
  void* p = allocate_capped(reported, std::move(r), device, cap);
  std::lock_guard lock(mutex_);
  ++this_call.locks;
  for (usage* u : {&usage_[device], &total_}) count_allocate(*u, reported, bytes, false);
  remember(p, live_block{bytes, stream, nullptr, device});
  return p;
}

// Either free takes the other's blocks too (each answers not_found for neither): callers of the
// C ABI's two frees need not tell them apart.
void bridge::deallocate(void* p) {
  if (p == nullptr) return;
  this_call = {};
  if (!free_device_block(p) && !free_host_block(p))
    throw_error(errc::not_found, "umem torch bridge: free of a pointer that is not a live allocation");
}

bool bridge::free_device_block(void* p) {
  std::unique_lock lock(mutex_);
  ++this_call.locks;
  std::optional<live_block> taken = live_.take(key_of(p));
  if (!taken) return false;
  const live_block l = std::move(*taken);
  const std::size_t reported = pytorch_size(l.requested);
  // A block used on its own stream only is free for that stream at once, as in PyTorch.
  for (usage* u : {&usage_[l.device], &total_}) count_free(*u, reported, l.requested, !l.shared());
  if (frees_at_once(l)) {
    lock.unlock();
    alloc_->deallocate(p);
    return true;
  }
  cache_->deallocate(held_block{p, reported, l.device}, l.stream,
                     l.uses ? std::span<void* const>(*l.uses) : std::span<void* const>(),
                     captures_.load() > 0);
  return true;
}

bool bridge::free_host_block(void* p) {
  std::optional<std::size_t> requested;
  {
    host_shard& s = shard_of(p);
    std::lock_guard lock(s.lock);
    requested = s.live.take(key_of(p));
  }
  if (!requested) return false;
  const std::size_t reported = pytorch_size(*requested);
  host_stats_.freed(reported, *requested);
  if (host_uses_count_.load(std::memory_order_acquire) != 0 && hold_host_block(p, reported))
    return true;
  alloc_->deallocate(p);
  return true;
}

bool bridge::hold_host_block(void* p, std::size_t reported) {
  std::lock_guard lock(mutex_);
  auto it = host_uses_.find(p);
  if (it == host_uses_.end()) return false;
  const host_use use = std::move(it->second);
  host_uses_.erase(it);
  host_uses_count_.fetch_sub(1, std::memory_order_relaxed);
  if (process_.is_other()) return false;
  // Earlier held blocks whose transfers are done; no event is queried during a capture (Note
  // [Frees during graph capture] in stream_ordered_cache.hpp).
  if (captures_.load() == 0) cache_->release_completed();
  // Every stream as a use, so that the block waits in the cache's shared list, which no stream
  // reuses from: a host block must never become a GPU tensor's.
  cache_->deallocate(held_block{p, reported, use.device, true}, use.streams.front(), use.streams,
                     captures_.load() > 0);
  return true;
}

bool bridge::record_host_use(void* p, void* stream, int device) {
  {
    const host_shard& s = shard_of(p);
    std::lock_guard lock(s.lock);
    if (!s.live.contains(key_of(p))) return false;
  }
  std::lock_guard lock(mutex_);
  auto [it, fresh] = host_uses_.try_emplace(p);
  host_use& use = it->second;
  if (fresh) {
    use.device = device;
    host_uses_count_.fetch_add(1, std::memory_order_release);
  } else if (use.device != device) {
    return false;
  }
  if (std::find(use.streams.begin(), use.streams.end(), stream) == use.streams.end())
    use.streams.push_back(stream);
  return true;
}

void bridge::record_stream(void* p, void* stream) {
  std::lock_guard lock(mutex_);
  live_block* found = live_.find(key_of(p));
  if (!found)
    throw_error(errc::invalid_argument,
                "umem torch bridge: record_stream of a pointer that is not a live allocation");
  live_block& l = *found;
  if (stream == l.stream) return;  // its order already covers the use: no event needed
  if (!l.uses) l.uses = std::make_unique<std::vector<void*>>();
  if (std::find(l.uses->begin(), l.uses->end(), stream) == l.uses->end())
    l.uses->push_back(stream);
}

bool bridge::owns(const void* p) const {
  {
    std::lock_guard lock(mutex_);
    if (live_.contains(key_of(p))) return true;
  }
  const host_shard& s = shard_of(p);
  std::lock_guard lock(s.lock);
  return s.live.contains(key_of(p));
}

void* bridge::allocate_host(std::size_t bytes, int node) {
  if (bytes == 0) throw_error(errc::invalid_argument, "umem torch bridge: allocation of 0 bytes");
  const std::size_t reported = pytorch_size(bytes);
  // A thread-cached block first, without the request and retry bookkeeping of allocate_capped:
  // small CPU tensors are most of PyTorch's allocations, and this is what a hit costs.
  void* p = node < 0 ? alloc_->allocate_cached(reported) : nullptr;
  if (p == nullptr) {
    alloc::request r;
    if (node >= 0) r.where = alloc::placement{alloc::placement_kind::node, node, {}};
    p = allocate_capped(reported, r, -1);
  }
  try {
    host_stats_.allocated(reported, bytes);  // std::bad_alloc only on a thread's first call
  } catch (...) {
    alloc_->deallocate(p);
    throw;
  }
  try {
    host_shard& s = shard_of(p);
    std::lock_guard lock(s.lock);
    s.live.insert(key_of(p), bytes);  // growing the table may throw std::bad_alloc
  } catch (...) {
    host_stats_.freed(reported, bytes);
    alloc_->deallocate(p);
    throw;
  }
  return p;
}

void bridge::deallocate_host(void* p) {
  if (p == nullptr) return;
  if (!free_host_block(p) && !free_device_block(p))
    throw_error(errc::not_found, "umem torch bridge: free of a pointer that is not a live allocation");
}

void* bridge::allocate_segment(std::size_t bytes, int device) {
  if (bytes == 0) throw_error(errc::invalid_argument, "umem torch bridge: allocation of 0 bytes");
  // PyTorch caches and counts these segments itself (allocator.hpp, request::own_segment).
  alloc::request r = request_for(device);
  r.own_segment = true;
  void* p = allocate_capped(bytes, r, device);
  const std::size_t usable = alloc_->allocation_size(p);
  std::lock_guard lock(mutex_);
  lent_[p] = {usable, device};
  for (usage* u : {&usage_[device], &total_}) {
    u->lent_bytes += static_cast<std::int64_t>(usable);
    ++u->lent_segments;
  }
  return p;
}

void bridge::deallocate_segment(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard lock(mutex_);
    auto it = lent_.find(p);
    if (it == lent_.end())
      throw_error(errc::invalid_argument,
                  "umem torch bridge: free of a pool segment that umem did not lend");
    for (usage* u : {&usage_[it->second.second], &total_}) {
      u->lent_bytes -= static_cast<std::int64_t>(it->second.first);
      --u->lent_segments;
    }
    lent_.erase(it);
  }
  alloc_->deallocate(p);
}

void bridge::set_external_reserved(int device, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  usage_[device].external_bytes = static_cast<std::int64_t>(bytes);
}

bool bridge::frees_at_once(const live_block& l) const {
  if (l.device < 0) return true;  // host memory has no streams
  if (l.shared() || captures_.load() > 0 || trims_ > 0) return false;
  const auto it = sole_.find(l.device);
  return it != sole_.end() && it->second.known && !it->second.ended &&
         it->second.stream == l.stream;
}

bool bridge::admit_stream(int device, void* stream) {
  sole_stream& s = sole_[device];
  if (s.ended) return true;
  if (!s.known) {
    s.known = true;
    s.stream = stream;
    return true;
  }
  if (s.stream == stream) return true;
  // Until the sole stream's work is waited for, its freed blocks in the pool are not this
  // stream's to take: a segment of its own instead, during a capture or without events.
  if (captures_.load() > 0 || !cache_->wait_for_stream(device, s.stream)) return false;
  s.ended = true;
  log().debug("umem torch bridge: device {} has a second stream; frees wait on streams again",
              device);
  return true;
}

std::size_t bridge::release_held(bool synchronized) {
  std::lock_guard lock(mutex_);
  ++this_call.locks;
  return cache_->release_all(synchronized);
}

std::size_t bridge::trim(bool synchronized) {
  {
    std::lock_guard lock(mutex_);
    // Like PyTorch's caching allocator, nothing is given back during a graph capture.
    if (captures_.load() > 0) return 0;
    ++trims_;
    // Blocks its sole stream freed straight into the pool are done once this wait returns; frees
    // from here to the trim's end wait in the cache (frees_at_once).
    if (!synchronized)
      for (auto& [device, s] : sole_)
        if (s.known && !s.ended) cache_->wait_for_stream(device, s.stream);
  }
  struct trim_end {
    bridge& b;
    ~trim_end() {
      std::lock_guard lock(b.mutex_);
      --b.trims_;
    }
  } end{*this};
  return alloc_->trim();
}

void bridge::capture_begin() { captures_.fetch_add(1); }

void bridge::capture_end() {
  if (captures_.fetch_sub(1) == 1) {
    std::lock_guard lock(mutex_);
    cache_->arm_deferred();
  }
}

std::size_t bridge::empty_cache(bool device_synchronized) {
  // During a capture PyTorch's allocator keeps its cache too: releasing waits on events.
  if (captures_.load() > 0) return 0;
  release_held(device_synchronized);
  return trim(device_synchronized);
}

void bridge::set_memory_fraction(double fraction, int device) {
  if (!(fraction >= 0.0 && fraction <= 1.0))
    throw_error(errc::invalid_argument, "memory fraction " + std::to_string(fraction) +
                                            " is not in [0, 1] (1 removes the cap)");
  std::optional<std::uint64_t> cap;
  if (fraction < 1.0) {
    const std::uint64_t total = capacity(device).second;
    cap = static_cast<std::uint64_t>(fraction * static_cast<double>(total));
  }
  std::lock_guard lock(mutex_);
  usage& u = usage_[device];
  if (u.cap_bytes.has_value() != cap.has_value()) capped_devices_.fetch_add(cap ? 1 : -1);
  u.fraction = fraction;
  u.cap_bytes = cap;
}

double bridge::memory_fraction(int device) const {
  std::lock_guard lock(mutex_);
  auto it = usage_.find(device);
  return it == usage_.end() ? 1.0 : it->second.fraction;
}

std::pair<std::uint64_t, std::uint64_t> bridge::mem_get_info(int device) const {
  auto [free_bytes, total] = capacity(device);
  std::lock_guard lock(mutex_);
  if (auto it = usage_.find(device); it != usage_.end() && it->second.cap_bytes) {
    total = std::min(total, *it->second.cap_bytes);
    const auto used = static_cast<std::uint64_t>(it->second.allocated[0].current);
    free_bytes = std::min(free_bytes, total > used ? total - used : 0);
  }
  return {std::min(free_bytes, total), total};
}

std::pair<std::uint64_t, std::uint64_t> bridge::capacity(int device) const {
  std::uint64_t free_bytes = 0, total = 0;
  const auto own = device >= 0 && !alloc_->topo().gpus().empty()
                       ? alloc_->device_memory_info(device)
                       : std::nullopt;
  if (own) {
    std::tie(free_bytes, total) = *own;  // a discrete GPU: its own memory
  } else {
    const int node = node_of_device(device);
    const auto os = numa::node_free_and_total(node);
    if (!os)
      throw_error(errc::unsupported, "mem_get_info: the kernel reports no memory for NUMA node " +
                                         std::to_string(node) + " (numa_node_size64 failed)");
    std::tie(free_bytes, total) = *os;
  }
  // Cached but unused bytes of the device's pools are free for PyTorch too.
  const auto [reserved, allocated] = reserved_of(device, own.has_value());
  std::size_t held = 0;
  {
    std::lock_guard lock(mutex_);
    held = cache_->held_bytes(device);
  }
  const std::int64_t cached = reserved - allocated + static_cast<std::int64_t>(held);
  free_bytes += static_cast<std::uint64_t>(std::max<std::int64_t>(cached, 0));
  return {free_bytes, total};
}

device_stats bridge::stats(int device) const {
  device_stats out;
  const int node = device >= 0 ? node_of_device(device) : -1;
  const bool own = discrete(device);
  for (const alloc::pool_report& r : alloc_->pool_reports(false)) {
    if (device >= 0 && !holds_device_memory(r, device, own, node)) continue;
    if (device == host && r.device >= 0) continue;  // a discrete GPU's own memory
    for (std::size_t c = 0; c < alloc::size_class_count; ++c) {
      const auto cls = static_cast<alloc::size_class>(c);
      for (auto [from, to] : {std::pair{alloc::metric::reserved_bytes, &out.reserved_bytes},
                              std::pair{alloc::metric::segment, &out.segment}}) {
        const alloc::stat& s = r.stats(from, cls);
        alloc::stat& d = (*to)[c];
        d.current += s.current;
        d.peak += s.peak;  // pools of one node peak together closely enough for PyTorch's view
        d.allocated += s.allocated;
        d.freed += s.freed;
      }
    }
    out.num_device_alloc += r.stats[alloc::counter::upstream_allocs];
    out.num_device_free += r.stats[alloc::counter::upstream_frees];
  }
  usage u;
  {
    std::lock_guard lock(mutex_);
    u = gpu_usage(device);
  }
  if (device < 0) add_host_usage(u);  // read outside mutex_: the host's has its own locks
  out.allocation = u.allocation;
  out.allocated_bytes = u.allocated;
  out.requested_bytes = u.requested;
  out.active = u.active;
  out.active_bytes = u.active_bytes;
  out.num_alloc_retries = u.num_alloc_retries;
  out.num_ooms = u.num_ooms;
  // PyTorch reports the segments it took for its own pools (2 MiB or more: umem's large blocks);
  // here they are only blocks of umem's. Peaks cannot be corrected exactly: they stay at least
  // the current value, and equal it after a reset.
  for (std::size_t c : {std::size_t{0}, static_cast<std::size_t>(alloc::size_class::large_pool)}) {
    for (auto [by_class, lent] : {std::pair{&out.reserved_bytes, u.lent_bytes},
                                  std::pair{&out.segment, u.lent_segments}}) {
      alloc::stat& x = (*by_class)[c];
      x.current -= lent;
      x.peak = std::max(x.peak - lent, x.current);
    }
  }
  return out;
}

std::map<std::string, std::int64_t> bridge::memory_stats(int device) const {
  const device_stats s = stats(device);
  std::map<std::string, std::int64_t> out;
  const std::pair<const char*, const device_stats::by_class*> metrics[] = {
      {"allocation", &s.allocation},         {"segment", &s.segment},
      {"active", &s.active},                 {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes}, {"active_bytes", &s.active_bytes},
      {"requested_bytes", &s.requested_bytes}};
  for (const auto& [metric, by_class] : metrics)
    for (std::size_t c = 0; c < alloc::size_class_count; ++c) {
      const std::string prefix = std::string(metric) + "." +
                                 alloc::to_string(static_cast<alloc::size_class>(c)) + ".";
      const alloc::stat& x = (*by_class)[c];
      out[prefix + "current"] = x.current;
      out[prefix + "peak"] = x.peak;
      out[prefix + "allocated"] = x.allocated;
      out[prefix + "freed"] = x.freed;
    }
  out["num_ooms"] = s.num_ooms;
  out["num_alloc_retries"] = s.num_alloc_retries;
  out["num_device_alloc"] = s.num_device_alloc;
  out["num_device_free"] = s.num_device_free;
  std::lock_guard lock(mutex_);
  out["umem.held_for_streams_bytes"] =
      device == host ? 0 : static_cast<std::int64_t>(cache_->held_bytes(device));
  const usage u = gpu_usage(device);  // what follows has no host part
  out["umem.stream_reuses"] = u.stream_reuses;
  out["umem.limit_bytes"] = u.cap_bytes ? static_cast<std::int64_t>(*u.cap_bytes) : -1;
  out["umem.lent_bytes"] = u.lent_bytes;  // segments of PyTorch's own (private) pools
  out["umem.lent_segments"] = u.lent_segments;
  if (device >= 0) out["umem.numa_node"] = node_of_device(device);
  return out;
}

bridge::usage bridge::gpu_usage(int device) const {
  if (device == all_devices) return total_;
  if (device >= 0)
    if (auto it = usage_.find(device); it != usage_.end()) return it->second;
  return {};
}

void bridge::add_host_usage(usage& u) const {
  usage h;
  const host_statistics::snapshot hs = host_stats_.read();
  h.allocated = h.active_bytes = hs.allocated_bytes;
  h.requested = hs.requested_bytes;
  h.allocation = h.active = hs.allocation;
  h.num_ooms = hs.num_ooms;
  h.num_alloc_retries = hs.num_alloc_retries;
  const auto to = u.gauges(), from = h.gauges();
  for (std::size_t g = 0; g < to.size(); ++g)
    for (std::size_t c = 0; c < alloc::size_class_count; ++c) {
      alloc::stat& a = (*to[g])[c];
      const alloc::stat& b = (*from[g])[c];
      a.current += b.current;
      a.peak += b.peak;  // Note [Host path]
      a.allocated += b.allocated;
      a.freed += b.freed;
    }
  u.num_ooms += h.num_ooms;
  u.num_alloc_retries += h.num_alloc_retries;
}

template <class F>
void bridge::for_each_usage(int device, F&& f) {
  std::lock_guard lock(mutex_);
  if (device >= 0) {
    f(usage_[device]);
    return;
  }
  for (auto& [d, u] : usage_) f(u);
  f(total_);
}

void bridge::reset_peak_stats(int device) {
  if (device == host || device == all_devices) host_stats_.reset_peaks();
  if (device != host)
    for_each_usage(device, [](usage& u) {
      for (device_stats::by_class* s : u.gauges()) reset_peaks(*s);
    });
  // Segments are the pools': their peaks restart too (other devices' pools included when they
  // share a node, as reserved_bytes does).
  alloc_->reset_peak_stats();
}

void bridge::reset_accumulated_stats(int device) {
  if (device == host || device == all_devices) host_stats_.reset_accumulated();
  if (device == host) return;
  for_each_usage(device, [](usage& u) {
    for (device_stats::by_class* s : u.gauges()) reset_accumulated(*s);
    u.num_ooms = u.num_alloc_retries = 0;
  });
}

std::vector<segment_view> bridge::segments(int device) const {
  const int node = node_of_device(device);
  const bool own = discrete(device);
  std::vector<segment_view> out;
  const auto reports = alloc_->pool_reports(true);
  std::lock_guard lock(mutex_);
  for (const alloc::pool_report& r : reports) {
    if (!holds_device_memory(r, device, own, node)) continue;
    for (const alloc::segment_snapshot& s : r.snapshot.segments) {
      segment_view v{s.base, s.size, s.pool == alloc::size_class::large_pool, {}};
      for (const alloc::block_snapshot& b : s.blocks) {
        block_view bv{b.size, 0, false, false};
        // A block umem handed out but PyTorch freed waits for its streams: free for PyTorch.
        if (b.allocated) {
          std::optional<std::size_t> requested;
          if (const live_block* l = live_.find(s.base + b.offset)) {
            requested = l->requested;
          } else {
            const host_shard& h = shard_of(reinterpret_cast<const void*>(s.base + b.offset));
            std::lock_guard host_lock(h.lock);  // after mutex_, as everywhere
            if (const std::size_t* n = h.live.find(s.base + b.offset)) requested = *n;
          }
          if (requested) {
            bv.allocated = bv.active = true;
            bv.requested = *requested;
          }
        }
        v.blocks.push_back(bv);
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

bool bridge::all_gpus_unified() const {
  std::call_once(unified_once_, [this] {
    const int n = static_cast<int>(alloc_->topo().gpus().size());
    bool unified = n > 0;
    for (int d = 0; d < n && unified; ++d) unified = device_memory_is_host(d);
    all_gpus_unified_ = unified;
  });
  return all_gpus_unified_;
}

gpu_access bridge::access(const void* p, std::size_t bytes) const {
  gpu_access a;
  try {
    a.umem_memory = alloc_->allocation_size(p) >= bytes;
  } catch (const error&) {
    a.umem_memory = false;
  }
  if (a.umem_memory && alloc_->kind_of(p) == alloc::memory_kind::device) {
    a.accessible = true;
    a.host_accessible = false;
    a.reason = "umem memory in a discrete GPU's own memory: the GPU uses it in place, the CPU "
               "cannot";
  } else if (a.umem_memory) {
    a.accessible = alloc_->gpu_accessible();
    a.reason = a.accessible ? "umem memory, made GPU-accessible by the allocator's GPU mapper"
                            : "umem memory, but it is host-only: " + no_gpu_reason_;
  } else if (host_memory_gpu_accessible_) {
    a.accessible = true;
    a.reason = "not umem memory, but every GPU here can access host memory (XNACK on or "
               "pageable memory access)";
  } else if (alloc_->pins_foreign() && all_gpus_unified()) {
    const std::uint64_t least = alloc_->options().foreign_alias_min;
    a.registrable = bytes >= least;
    a.reason = "not umem memory, and " + no_gpu_reason_ +
               (a.registrable ? "; a zero-copy alias registers it with the GPU runtime (pinning "
                                "its pages) for the alias's life"
                              : "; it is smaller than foreign_alias_min (" +
                                    std::to_string(least) +
                                    " bytes), below which a copy costs less than a registration");
  } else {
    a.reason = "not memory of umem's allocator (PyTorch's own allocator made it), and " +
               no_gpu_reason_ + "; allocate it with umem.torch.empty(...) instead";
  }
  return a;
}

std::shared_ptr<void> bridge::register_alias(const void* p, std::size_t bytes) {
  const gpu_access a = access(p, bytes);
  if (!a.accessible && !a.registrable)
    throw_error(errc::unsupported, "the GPU cannot use this memory: " + a.reason);
  if (a.umem_memory) return nullptr;  // its segment is GPU-visible already
  return alloc_->register_foreign(p, bytes);
}

std::string bridge::describe() const {
  return alloc_->describe() + "\nhost memory GPU-accessible without umem: " +
         (host_memory_gpu_accessible_ ? "yes" : "no (" + no_gpu_reason_ + ")");
}

}  // namespace umem::torch_bridge
