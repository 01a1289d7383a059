// libumem_torch's C ABI, umem_torch.h's sections "Errors", "Enabling", "Pluggable mode" and
// "Extension mode": the bridge's creation and every function on a PyTorch allocation's path (Note
// [Where a PyTorch allocation goes] in extension/umem_cuda_allocator.cpp). Every entry point
// catches everything and keeps the message per thread, except umem_torch_pluggable_malloc in
// OOM-exception mode (umem_torch_set_oom_exceptions in umem_torch.h).
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bridge_instance.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/core/error.hpp"
#include "umem/umem_torch.h"

namespace umem::torch_bridge::c_abi {

alloc::c_failure& last_failure() {
  thread_local alloc::c_failure record;
  return record;
}
std::atomic<bridge*> the_bridge{nullptr};

namespace {

// Never destroyed, like the bridge.
std::mutex bridge_mutex;
// Note [Fork] (fork_safety.hpp); never destroyed, like the bridge.
const auto* const bridge_fork = new std::shared_ptr<void>(
    alloc::lock_around_fork(bridge_mutex, alloc::fork_rank::creation));
umem_torch_event_provider event_provider{};
std::atomic<bool> oom_exceptions{false};

// A stream_event over the C provider's functions.
class provided_event final : public machine::stream_event {
 public:
  provided_event(const umem_torch_event_provider& p, int device) : p_(p), e_(p.create(device)) {
    if (e_ == nullptr)
      throw_error(errc::runtime_error,
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
      throw_error(errc::runtime_error,
                  "the event provider's query() reported error " + std::to_string(r));
    return r != 0;
  }
  void synchronize() override { p_.synchronize(e_); }

 private:
  umem_torch_event_provider p_;
  void* e_;
};

// Under bridge_mutex.
bridge& create_bridge_locked(const alloc::alloc_options& options) {
  event_factory events;
  if (event_provider.create != nullptr) {
    const umem_torch_event_provider p = event_provider;
    events = [p](int device) { return std::make_unique<provided_event>(p, device); };
  }
  auto* b = new bridge(options, std::move(events));
  the_bridge.store(b, std::memory_order_release);
  return *b;
}

// What `function`, which configures the bridge, answers once the bridge exists.
umem_status refuse_after_creation(const char* function, const char* advice) {
  return fail(last, UMEM_ERR_ALREADY_INITIALIZED,
              std::string(function) + ": the torch bridge already exists" + advice);
}

}  // namespace

bridge& create_default_bridge() {
  std::lock_guard lock(bridge_mutex);
  if (bridge* b = the_bridge.load(std::memory_order_relaxed)) return *b;
  return create_bridge_locked(alloc::options_from_environment());
}

}  // namespace umem::torch_bridge::c_abi

using umem::torch_bridge::bridge;
using umem::torch_bridge::c_abi::get_bridge;
using umem::torch_bridge::c_abi::last;
using umem::torch_bridge::c_abi::last_failure;
using umem::torch_bridge::c_abi::bridge_mutex;
using umem::torch_bridge::c_abi::create_bridge_locked;
using umem::torch_bridge::c_abi::event_provider;
using umem::torch_bridge::c_abi::oom_exceptions;
using umem::torch_bridge::c_abi::refuse_after_creation;
using umem::torch_bridge::c_abi::the_bridge;

extern "C" {

void umem_torch_string_free(char* s) { std::free(s); }

const char* umem_torch_last_error(void) { return last_failure().message.c_str(); }

umem_status umem_torch_last_status(void) { return last_failure().status; }

umem_status umem_torch_init(const char* conf) {
  std::lock_guard lock(bridge_mutex);
  if (the_bridge.load() != nullptr)
    return refuse_after_creation("umem_torch_init",
                                 " (an allocation or an earlier init created it); configure it "
                                 "once, before the first allocation");
  return guarded(last, [&] {
    auto options = umem::alloc::options_from_environment();
    if (conf != nullptr) options = umem::alloc::parse_alloc_conf(conf, options);
    create_bridge_locked(options);
  });
}

char* umem_torch_describe(void) {
  return guarded_string(last, [&] { return get_bridge().describe(); });
}

umem_status umem_torch_set_event_provider(const umem_torch_event_provider* provider) {
  std::lock_guard lock(bridge_mutex);
  if (the_bridge.load() != nullptr)
    return refuse_after_creation("umem_torch_set_event_provider",
                                 "; set the provider before the first allocation");
  if (provider == nullptr || provider->create == nullptr || provider->record == nullptr ||
      provider->query == nullptr || provider->synchronize == nullptr || provider->destroy == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT,
                "umem_torch_set_event_provider: every function of the provider must be set");
  event_provider = *provider;
  return UMEM_OK;
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
  if (s != UMEM_OK && oom_exceptions.load()) throw std::runtime_error(last_failure().message);
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

umem_status umem_torch_record_stream(void* ptr, void* stream) {
  return guarded(last, [&] { get_bridge().record_stream(ptr, stream); });
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

}  // extern "C"
