// libumem_torch.so's functions as umem's PyTorch extensions call them. An extension does not link
// the library: the Python package, which loaded it, passes the address of every function the
// library exports to the extension's install() (python/umem/_extension.py), so the extension and
// the package share one loaded copy. The types come from umem_torch.h, so a mismatch does not
// compile.
#pragma once

#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "umem/umem_torch.h"

namespace umem_extension {

struct library_functions {
#define UMEM_FN(name) decltype(&::name) name = nullptr;
#define UMEM_LIBRARY_FUNCTIONS(X)                                                             \
  X(umem_torch_extension_alloc) X(umem_torch_extension_release) X(umem_torch_record_stream)  \
  X(umem_torch_owns) X(umem_torch_segment_alloc) X(umem_torch_segment_free)                  \
  X(umem_torch_set_external_reserved) X(umem_torch_capture_begin) X(umem_torch_capture_end)  \
  X(umem_torch_get_device_stats) X(umem_torch_reset_peak_stats)                              \
  X(umem_torch_reset_accumulated_stats) X(umem_torch_empty_cache)                            \
  X(umem_torch_set_memory_fraction) X(umem_torch_get_memory_fraction)                        \
  X(umem_torch_mem_get_info) X(umem_torch_visit_segments) X(umem_torch_set_event_provider)   \
  X(umem_torch_host_malloc) X(umem_torch_host_free) X(umem_torch_host_record_use)            \
  X(umem_torch_last_error)
  UMEM_LIBRARY_FUNCTIONS(UMEM_FN)
#undef UMEM_FN
};

// Set once by install(), before any allocator of the extension exists. Internal linkage: the CPU
// and the GPU extension may both be loaded, and GCC would make one `inline` variable of the two.
static library_functions fn;

// Sets fn from install()'s {name: address}; raises naming a function the table lacks (a library
// older than the extension). `extension` names the caller in that message.
inline void take_library_functions(const pybind11::dict& functions, const char* extension) {
  auto take = [&](const char* name) -> std::uintptr_t {
    TORCH_CHECK(functions.contains(name), "umem: libumem_torch.so function ", name,
                " was not passed to the ", extension);
    return functions[name].cast<std::uintptr_t>();
  };
#define UMEM_TAKE(name) fn.name = reinterpret_cast<decltype(fn.name)>(take(#name));
  UMEM_LIBRARY_FUNCTIONS(UMEM_TAKE)
#undef UMEM_TAKE
}

}  // namespace umem_extension
