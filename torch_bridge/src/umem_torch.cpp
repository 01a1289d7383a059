// The C ABI of the torch bridge (umem/umem_torch.h): every entry point catches everything and keeps
// the message per thread, except umem_torch_pluggable_malloc in OOM-exception mode
// (umem_torch_set_oom_exceptions in umem_torch.h).
#include "umem/umem_torch.h"


#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "umem/allocator/c_boundary.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/core/error.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/numa/memory_policy.hpp"
#include "umem/torch_bridge/bridge.hpp"
#include "umem/torch_bridge/rank_binding.hpp"
#include "umem/weights/checkpoint.hpp"
#include "umem/weights/safetensors_file.hpp"

namespace {

using umem::torch_bridge::bridge;

thread_local umem::alloc::c_failure last;

// Deliberately never destroyed: PyTorch frees tensors from static destructors and exit handlers.
std::mutex bridge_mutex;
// Note [Fork] (fork_safety.hpp); never destroyed, like the bridge.
const auto* const bridge_fork = new std::shared_ptr<void>(
    umem::alloc::lock_around_fork(bridge_mutex, umem::alloc::fork_rank::creation));
// Set once, under bridge_mutex; read without it on the allocation path.
std::atomic<bridge*> the_bridge{nullptr};
umem_torch_event_provider event_provider{};
std::atomic<bool> oom_exceptions{false};

// A stream_event over the C provider's functions.
class provided_event final : public umem::machine::stream_event {
 public:
  provided_event(const umem_torch_event_provider& p, int device) : p_(p), e_(p.create(device)) {
    if (e_ == nullptr)
      umem::throw_error(umem::errc::runtime_error,
                        "the event provider's create() returned NULL for device " +
                            std::to_string(device));
  }
  ~provided_event() override { p_.destroy(e_); }
  provided_event(const provided_event&) = delete;
  provided_event& operator=(const provided_event&) = delete;
  void record(void* stream) override { p_.record(e_, stream); }
  bool query() override {
    const int r = p_.query(e_);
    if (r < 0)
      umem::throw_error(umem::errc::runtime_error,
                        "the event provider's query() reported error " + std::to_string(r));
    return r != 0;
  }
  void synchronize() override { p_.synchronize(e_); }

 private:
  umem_torch_event_provider p_;
  void* e_;
};

bridge& make_bridge_locked(const umem::alloc::alloc_options& options) {
  umem::torch_bridge::event_factory events;
  if (event_provider.create != nullptr) {
    const umem_torch_event_provider p = event_provider;
    events = [p](int device) { return std::make_unique<provided_event>(p, device); };
  }
  auto* b = new bridge(options, std::move(events));
  the_bridge.store(b, std::memory_order_release);
  return *b;
}

bridge& get_bridge() {
  if (bridge* b = the_bridge.load(std::memory_order_acquire)) return *b;
  std::lock_guard lock(bridge_mutex);
  if (bridge* b = the_bridge.load(std::memory_order_relaxed)) return *b;
  return make_bridge_locked(umem::alloc::options_from_environment());
}

umem::topology topology_of(const char* snapshot_json) {
  if (snapshot_json != nullptr) return umem::snapshot_from_json(snapshot_json, "<snapshot given>");
  return umem::machine::discover_live_machine().topo;
}

// Readers of weights for NUMA node `node` (-1: no binding) run on its CPUs (Note [Reading
// weights]).
umem::weights::read_options reader_options(const bridge& b, int node, unsigned threads,
                                           int direct_io) {
  umem::weights::read_options o{threads, direct_io != 0, {}};
  if (node >= 0) {
    const umem::numa_node* n = b.allocator().topo().find_numa_node(node);
    if (n == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "weights: NUMA node " + std::to_string(node) +
                            " is not a node of this machine");
    o.cpus = n->cpus;
  }
  return o;
}

// A file's tensors as load_safetensors reads them (umem_torch.h).
nlohmann::json layout_json(const umem::weights::safetensors_header& h, std::uint64_t data_bytes) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const umem::weights::tensor_entry& t : h.tensors)
    tensors.push_back({{"name", t.name},
                       {"dtype", std::string(umem::weights::dtype_name(t.dtype))},
                       {"shape", t.shape},
                       {"begin", t.begin},
                       {"end", t.end}});
  return {{"data_bytes", data_bytes}, {"metadata", h.metadata}, {"tensors", std::move(tensors)}};
}

}  // namespace

extern "C" {

umem_status umem_torch_init(const char* conf) {
  std::lock_guard lock(bridge_mutex);
  if (the_bridge.load() != nullptr)
    return fail(last, UMEM_ERR_ALREADY_INITIALIZED,
                "umem_torch_init: the torch bridge already exists (an allocation or an earlier "
                "init created it); configure it once, before the first allocation");
  return guarded(last, [&] {
    auto options = umem::alloc::options_from_environment();
    if (conf != nullptr) options = umem::alloc::parse_alloc_conf(conf, options);
    make_bridge_locked(options);
  });
}

void* umem_torch_pluggable_malloc(ssize_t size, int device, void* stream) {
  void* p = nullptr;
  const umem_status s = guarded(last, [&] {
    if (size < 0)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_pluggable_malloc: negative size " + std::to_string(size));
    if (size == 0) return;  // PyTorch asks for empty tensors; NULL is their data pointer
    p = get_bridge().allocate(static_cast<std::size_t>(size), device, stream);
  });
  if (s != UMEM_OK && oom_exceptions.load()) throw std::runtime_error(last.message);
  return p;
}

void umem_torch_pluggable_free(void* ptr, ssize_t size, int device, void* stream) {
  if (ptr == nullptr) return;
  guarded(last, [&] {
    const std::size_t usable = get_bridge().allocator().allocation_size(ptr);
    if (size < 0 || static_cast<std::size_t>(size) > usable)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_pluggable_free: size " + std::to_string(size) +
                            " does not match the allocation (" + std::to_string(usable) +
                            " usable bytes)");
    (void)device;  // the bridge recorded both at allocation
    (void)stream;
    get_bridge().deallocate(ptr);
  });
}

void umem_torch_set_oom_exceptions(int enable) { oom_exceptions.store(enable != 0); }

umem_status umem_torch_host_malloc(size_t size, int node, void** out) {
  if (out == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_host_malloc: out is NULL");
  *out = nullptr;
  return guarded(last, [&] { *out = get_bridge().allocate_host(size, node); });
}

umem_status umem_torch_host_free(void* ptr) {
  if (ptr == nullptr) return UMEM_OK;
  return guarded(last, [&] { get_bridge().deallocate_host(ptr); });
}

umem_status umem_torch_empty_cache(int device_synchronized, size_t* released) {
  return guarded(last, [&] {
    const std::size_t n = get_bridge().empty_cache(device_synchronized != 0);
    if (released != nullptr) *released = n;
  });
}

umem_status umem_torch_set_memory_fraction(double fraction, int device) {
  return guarded(last, [&] { get_bridge().set_memory_fraction(fraction, device); });
}

umem_status umem_torch_get_memory_fraction(int device, double* fraction) {
  if (fraction == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT,
                "umem_torch_get_memory_fraction: fraction is NULL");
  return guarded(last, [&] { *fraction = get_bridge().memory_fraction(device); });
}

umem_status umem_torch_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  return guarded(last, [&] {
    const auto [f, t] = get_bridge().mem_get_info(device);
    if (free_bytes != nullptr) *free_bytes = f;
    if (total_bytes != nullptr) *total_bytes = t;
  });
}

char* umem_torch_memory_stats_json(int device) {
  return guarded_string(last, [&] {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : get_bridge().memory_stats(device)) j[k] = v;
    return j.dump();
  });
}

umem_status umem_torch_reset_peak_stats(int device) {
  return guarded(last, [&] { get_bridge().reset_peak_stats(device); });
}

char* umem_torch_gpu_access_json(const void* ptr, size_t size) {
  return guarded_string(last, [&] {
    const auto a = get_bridge().access(ptr, size);
    nlohmann::json j;
    j["accessible"] = a.accessible;
    j["umem"] = a.umem_memory;
    j["host_accessible"] = a.host_accessible;
    j["reason"] = a.reason;
    return j.dump();
  });
}

umem_status umem_torch_alias_register(const void* ptr, size_t size, void** handle) {
  return guarded(last, [&] {
    if (handle == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_alias_register: handle is NULL");
    *handle = nullptr;
    if (auto h = get_bridge().register_alias(ptr, size))
      *handle = new std::shared_ptr<void>(std::move(h));
  });
}

umem_status umem_torch_alias_release(void* handle) {
  delete static_cast<std::shared_ptr<void>*>(handle);
  return UMEM_OK;
}

char* umem_torch_device_json(int device) {
  return guarded_string(last, [&] {
    const bridge& b = get_bridge();
    return nlohmann::json{{"device", device},
                          {"memory", b.device_memory_is_host(device) ? "host" : "device"},
                          {"numa_node", b.node_of_device(device)}}
        .dump();
  });
}

char* umem_torch_residency_json(const void* ptr, size_t size) {
  return guarded_string(last, [&] {
    return umem::alloc::to_json(get_bridge().allocator().residency(ptr, size), -1);
  });
}

char* umem_torch_checkpoint_json(const char* path) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_checkpoint_json: path is NULL");
    const umem::weights::checkpoint c = umem::weights::resolve_checkpoint(path);
    return nlohmann::json{{"files", c.files}, {"weight_map", c.weight_map}}.dump();
  });
}

char* umem_torch_load_safetensors_json(const char* path, int node, unsigned threads,
                                       int direct_io) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_load_safetensors_json: path is NULL");
    bridge& b = get_bridge();
    const umem::weights::loaded_safetensors f = umem::weights::read_safetensors(
        path, [&](std::size_t bytes) { return b.allocate_host(bytes, node); },
        [&](void* p) { b.deallocate_host(p); }, reader_options(b, node, threads, direct_io));
    nlohmann::json j = layout_json(f.header, f.data_bytes);
    j["block"] = reinterpret_cast<std::uintptr_t>(f.block);
    j["data"] = reinterpret_cast<std::uintptr_t>(f.data);
    return j.dump();
  });
}

char* umem_torch_safetensors_layout_json(const char* path) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_safetensors_layout_json: path is NULL");
    const umem::weights::safetensors_layout l = umem::weights::read_safetensors_header(path);
    nlohmann::json j = layout_json(l.header, l.data_bytes);
    j["data_offset"] = l.data_offset;
    return j.dump();
  });
}

umem_status umem_torch_read_file(const char* path, uint64_t offset, uint64_t bytes, void* to,
                                 int node, unsigned threads, int direct_io) {
  return guarded(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_read_file: path is NULL");
    umem::weights::read_file_range(path, offset, bytes, to,
                                   reader_options(get_bridge(), node, threads, direct_io));
  });
}

char* umem_torch_topology_json(const char* snapshot_json) {
  return guarded_string(last, [&] { return umem::snapshot_to_json(topology_of(snapshot_json)); });
}

char* umem_torch_rank_binding_json(const char* snapshot_json, int local_rank, int local_size) {
  return guarded_string(last, [&] {
    return umem::torch_bridge::to_json(
        umem::torch_bridge::bind_rank(topology_of(snapshot_json), local_rank, local_size));
  });
}

umem_status umem_torch_set_memory_policy(int node, const char* mode) {
  return guarded(last, [&] {
    umem::numa::set_thread_memory_policy(
        node, umem::numa::parse_policy_mode(mode == nullptr ? "bind" : mode));
  });
}

umem_status umem_torch_set_event_provider(const umem_torch_event_provider* provider) {
  std::lock_guard lock(bridge_mutex);
  if (the_bridge.load() != nullptr)
    return fail(last, UMEM_ERR_ALREADY_INITIALIZED,
                "umem_torch_set_event_provider: the torch bridge already exists; set the "
                "provider before the first allocation");
  if (provider == nullptr || provider->create == nullptr || provider->record == nullptr ||
      provider->query == nullptr || provider->synchronize == nullptr || provider->destroy == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT,
                "umem_torch_set_event_provider: every function of the provider must be set");
  event_provider = *provider;
  return UMEM_OK;
}

umem_status umem_torch_extension_alloc(size_t size, int device, void* stream, void** out) {
  if (out == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_extension_alloc: out is NULL");
  *out = nullptr;
  if (device < 0)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_extension_alloc: device " +
                                               std::to_string(device) + " is not a GPU index");
  return guarded(last, [&] { *out = get_bridge().allocate(size, device, stream); });
}

umem_status umem_torch_extension_release(void* ptr) {
  if (ptr == nullptr) return UMEM_OK;
  return guarded(last, [&] { get_bridge().deallocate(ptr); });
}

umem_status umem_torch_segment_alloc(size_t size, int device, void** out) {
  if (out == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_segment_alloc: out is NULL");
  *out = nullptr;
  return guarded(last, [&] { *out = get_bridge().allocate_segment(size, device); });
}

umem_status umem_torch_segment_free(void* ptr) {
  return guarded(last, [&] { get_bridge().deallocate_segment(ptr); });
}

umem_status umem_torch_set_external_reserved(int device, uint64_t bytes) {
  return guarded(last, [&] { get_bridge().set_external_reserved(device, bytes); });
}

umem_status umem_torch_record_stream(void* ptr, void* stream) {
  return guarded(last, [&] { get_bridge().record_stream(ptr, stream); });
}

int umem_torch_owns(const void* ptr) {
  int owned = 0;
  guarded(last, [&] { owned = get_bridge().owns(ptr) ? 1 : 0; });
  return owned;
}

void umem_torch_capture_begin(void) {
  guarded(last, [&] { get_bridge().capture_begin(); });
}

void umem_torch_capture_end(void) {
  guarded(last, [&] { get_bridge().capture_end(); });
}

umem_status umem_torch_get_device_stats(int device, umem_torch_device_stats* out) {
  if (out == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_get_device_stats: out is NULL");
  return guarded(last, [&] {
    const umem::torch_bridge::device_stats s = get_bridge().stats(device);
    const std::pair<umem_torch_stat*, const umem::torch_bridge::device_stats::by_class*> pairs[] = {
        {out->allocation, &s.allocation},         {out->segment, &s.segment},
        {out->active, &s.active},                 {out->allocated_bytes, &s.allocated_bytes},
        {out->reserved_bytes, &s.reserved_bytes}, {out->active_bytes, &s.active_bytes},
        {out->requested_bytes, &s.requested_bytes}};
    for (const auto& [to, from] : pairs)
      for (std::size_t c = 0; c < from->size(); ++c)
        to[c] = {(*from)[c].current, (*from)[c].peak, (*from)[c].allocated, (*from)[c].freed};
    out->num_alloc_retries = s.num_alloc_retries;
    out->num_ooms = s.num_ooms;
    out->num_device_alloc = s.num_device_alloc;
    out->num_device_free = s.num_device_free;
  });
}

umem_status umem_torch_reset_accumulated_stats(int device) {
  return guarded(last, [&] { get_bridge().reset_accumulated_stats(device); });
}

umem_status umem_torch_visit_segments(int device, umem_torch_segment_visitor visit, void* ctx) {
  if (visit == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_visit_segments: visit is NULL");
  std::vector<umem::torch_bridge::segment_view> segments;
  const umem_status s = guarded(last, [&] { segments = get_bridge().segments(device); });
  if (s != UMEM_OK) return s;
  std::vector<umem_torch_block_info> blocks;
  for (const auto& seg : segments) {
    blocks.clear();
    for (const auto& b : seg.blocks)
      blocks.push_back({b.size, b.requested, b.allocated ? 1 : 0, b.active ? 1 : 0});
    const umem_torch_segment_info info{seg.address, seg.size, seg.is_large ? 1 : 0, blocks.size(),
                                       blocks.data()};
    visit(ctx, &info);
  }
  return UMEM_OK;
}

char* umem_torch_describe(void) {
  return guarded_string(last, [&] { return get_bridge().describe(); });
}

void umem_torch_string_free(char* s) { std::free(s); }

const char* umem_torch_last_error(void) { return last.message.c_str(); }

umem_status umem_torch_last_status(void) { return last.status; }

}  // extern "C"
