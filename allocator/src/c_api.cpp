// The C ABI (umem/umem.h): every entry point catches everything, maps it to a umem_status and
// keeps the message per thread. The default allocator lives here and only here.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "umem/allocator/detail/c_status.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/umem.h"

namespace {

using umem::alloc::allocator;

thread_local std::string last_error;

// Deliberately never destroyed: memory handed out may be freed by other exit handlers or other
// libraries' static destructors, and spdlog's registry may already be gone at exit.
std::mutex default_mutex;
allocator* default_allocator = nullptr;  // guarded by default_mutex until created
// Note [Fork]; never destroyed either.
const auto* const default_fork =
    new std::shared_ptr<void>(umem::alloc::lock_around_fork(default_mutex,
                                                            umem::alloc::fork_rank::creation));

umem_status fail(umem_status s, std::string message) {
  last_error = std::move(message);
  return s;
}

// Runs `f`, translating every exception; never lets one cross the C boundary.
template <typename F>
umem_status guarded(F&& f) {
  return umem::alloc::run_at_c_boundary(std::forward<F>(f), fail);
}

allocator& get_default() {
  std::lock_guard lock(default_mutex);
  if (!default_allocator)
    default_allocator = new allocator(umem::alloc::options_from_environment());
  return *default_allocator;
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace

extern "C" {

umem_status umem_init(const char* conf) {
  std::lock_guard lock(default_mutex);
  if (default_allocator)
    return fail(UMEM_ERR_ALREADY_INITIALIZED,
                "umem_init: the default allocator already exists (an earlier umem_init or "
                "umem_alloc created it); call umem_init once, before any allocation");
  return guarded([&] {
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
  if (out == nullptr) return fail(UMEM_ERR_INVALID_ARGUMENT, "umem_alloc_ex: out is NULL");
  *out = nullptr;
  return guarded([&] {
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
  return guarded([&] { get_default().deallocate(ptr); });
}

umem_status umem_trim(size_t* released) {
  return guarded([&] {
    const std::size_t n = get_default().trim();
    if (released != nullptr) *released = n;
  });
}

char* umem_stats_json(void) {
  char* out = nullptr;
  guarded([&] { out = dup_string(get_default().memory_stats_json()); });
  return out;
}

char* umem_residency_json(const void* ptr, size_t size) {
  char* out = nullptr;
  guarded([&] { out = dup_string(umem::alloc::to_json(get_default().residency(ptr, size))); });
  return out;
}

void umem_string_free(char* s) { std::free(s); }

const char* umem_last_error(void) { return last_error.c_str(); }

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
