// What every C library of umem (umem.h's c_api.cpp, umem_torch.h's torch_bridge/src/c_abi/) does
// at its boundary: record the calling thread's last failure, run C++ code so that no exception
// crosses into C, and hand strings over for the caller to free. Internal to the build
// (allocator/internal is on no install rule): no C++ API promise to users.
#pragma once

#include <string>
#include <utility>

#include "umem/allocator/detail/c_status.hpp"
#include "umem/umem.h"

namespace umem::alloc {

// One library's record of its caller's last failure; each library keeps its own, thread_local.
struct c_failure {
  std::string message;
  umem_status status = UMEM_OK;
};

// Where a library keeps it: a function returning the calling thread's record. Entry points take
// this rather than the thread_local itself so that a call that succeeds never touches it: in a
// shared library every use of a thread_local with a destructor goes through a TLS wrapper and
// __tls_get_addr, about a tenth of a CPU tensor's alloc+free (docs/log/
// 2026-12-05-cpu-tensor-call-path.md).
struct c_failure_source {
  c_failure& (*record)();
};

// Records `message` and `status` in the calling thread's record; returns `status`.
umem_status fail(c_failure_source last, umem_status status, std::string message);

// Runs `f`, translating every exception (run_at_c_boundary) into `last`.
template <typename F>
umem_status guarded(c_failure_source last, F&& f) {
  return run_at_c_boundary(std::forward<F>(f), [last](umem_status s, std::string message) {
    return fail(last, s, std::move(message));
  });
}

// A malloc'ed copy of `s` for the caller to free (umem_string_free, umem_torch_string_free);
// throws std::bad_alloc.
char* dup_string(const std::string& s);

// The string `f` returns as dup_string's copy, or NULL with the failure in `last`.
template <typename F>
char* guarded_string(c_failure_source last, F&& f) {
  char* out = nullptr;
  guarded(last, [&] { out = dup_string(f()); });
  return out;
}

}  // namespace umem::alloc
