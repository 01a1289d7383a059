// The C ABI (umem/umem.h): every entry point catches everything, maps it to a umem_status and
// keeps the message per thread. The default allocator lives here and only here.
#include <cstdlib>
#include <mutex>

#include "umem/allocator/allocator.hpp"
#include "umem/allocator/c_boundary.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/umem.h"

namespace {

using umem::alloc::allocator;

umem::alloc::c_failure& last_failure() {
  thread_local umem::alloc::c_failure record;
  return record;
}
constexpr umem::alloc::c_failure_source last{&last_failure};

// Deliberately never destroyed: memory handed out may be freed by other exit handlers or other
// libraries' static destructors, and spdlog's registry may already be gone at exit.
std::mutex default_mutex;
allocator* default_allocator = nullptr;  // guarded by default_mutex until created
// Note [Fork]; never destroyed either.
const auto* const default_fork =
    new std::shared_ptr<void>(umem::alloc::lock_around_fork(default_mutex,
                                                            umem::alloc::fork_rank::creation));

allocator& get_default() {
  std::lock_guard lock(default_mutex);
  if (!default_allocator)
    default_allocator = new allocator(umem::alloc::options_from_environment());
  return *default_allocator;
}

}  // namespace

extern "C" {

umem_status umem_init(const char* conf) {
  std::lock_guard lock(default_mutex);
  if (default_allocator)
    return fail(last, UMEM_ERR_ALREADY_INITIALIZED,
                "umem_init: the default allocator already exists (an earlier umem_init or "
                "umem_alloc created it); call umem_init once, before any allocation");
  return guarded(last, [&] {
    auto options = umem::alloc::options_from_environment();
    if (conf != nullptr) options = umem::alloc::parse_alloc_conf(conf, options);
    default_allocator = new allocator(options);
  });
}

void* umem_alloc(size_t size) {
  void* p = nullptr;
  return umem_alloc_ex(size, nullptr, nullptr, &p) == UMEM_OK ? p : nullptr;
}

umem_status umem_alloc_ex(size_t size, const char* placement, const char* coherence, void** out) {
  if (out == nullptr) return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_alloc_ex: out is NULL");
  *out = nullptr;
  return guarded(last, [&] {
    umem::alloc::request r;
    if (placement != nullptr) r.where = umem::alloc::parse_placement(placement);
    if (coherence != nullptr) {
      try {
        r.kind = umem::parse_coherence(coherence);
      } catch (const umem::error& e) {
        throw umem::error(e.code(), std::string("umem_alloc_ex: coherence ") + e.what());
      }
    }
    *out = get_default().allocate(size, r);
  });
}

umem_status umem_free(void* ptr) {
  if (ptr == nullptr) return UMEM_OK;
  return guarded(last, [&] { get_default().deallocate(ptr); });
}

umem_status umem_trim(size_t* released) {
  return guarded(last, [&] {
    const std::size_t n = get_default().trim();
    if (released != nullptr) *released = n;
  });
}

char* umem_stats_json(void) {
  return guarded_string(last, [] { return get_default().memory_stats_json(); });
}

char* umem_residency_json(const void* ptr, size_t size) {
  return guarded_string(last,
                        [&] { return umem::alloc::to_json(get_default().residency(ptr, size)); });
}

void umem_string_free(char* s) { std::free(s); }

const char* umem_last_error(void) { return last_failure().message.c_str(); }

const char* umem_status_string(umem_status status) {
  switch (status) {
    case UMEM_OK: return "UMEM_OK";
    case UMEM_ERR_INVALID_ARGUMENT: return "UMEM_ERR_INVALID_ARGUMENT";
    case UMEM_ERR_OUT_OF_MEMORY: return "UMEM_ERR_OUT_OF_MEMORY";
    case UMEM_ERR_NOT_FOUND: return "UMEM_ERR_NOT_FOUND";
    case UMEM_ERR_RUNTIME: return "UMEM_ERR_RUNTIME";
    case UMEM_ERR_UNSUPPORTED: return "UMEM_ERR_UNSUPPORTED";
    case UMEM_ERR_ALREADY_INITIALIZED: return "UMEM_ERR_ALREADY_INITIALIZED";
    case UMEM_ERR_INTERNAL: return "UMEM_ERR_INTERNAL";
  }
  return "unknown umem_status";
}

}  // extern "C"
