// The HIP runtime (libamdhip64) as one dlopen'd function table, like cuda_driver.hpp, for what
// only HIP can do in a process that uses it: mark a point in the hipStream_t streams PyTorch for
// ROCm runs its kernels on (stream events), and make host memory known to HIP's own registry of
// memory objects, without which hipMemcpy and hipMemset refuse it (Note [GPU visibility under
// HIP] in allocator/include/umem/allocator/gpu/hip_gpu_mapper.hpp).
//
// Note [HIP only when already loaded]
// umem never brings HIP into a process: its initialisation is heavy (it starts ROCr, scans every
// GPU, spawns threads) and a process that did not ask for it must not pay for it. So the table is
// only taken from a library that is already mapped (dlopen with RTLD_NOLOAD, never a new
// mapping): PyTorch for ROCm maps it at `import torch`. Not loaded is a normal state, reported
// plainly, never an error. UMEM_HIP_SYMBOLS is the single list of every entry point umem uses,
// with a required/optional column, as UMEM_CUDA_SYMBOLS: a missing required symbol fails the load
// naming the symbol and the library. After find_loaded() the table never changes, so it may be
// read from any thread. The function types use hip_* mirrors of the HIP types (opaque handles are
// pointers, hipError_t is an int); hip_compat.hpp holds the numbers.
//
// Environment (read through umem::env_value): UMEM_HIP_RUNTIME_LIB.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "umem/core/shared_library.hpp"
#include "umem/hip_runtime/hip_compat.hpp"

namespace umem::hip {

using hip_error = int;  // hipError_t (an enum of non-negative values)
struct hip_event_st;
struct hip_stream_st;
using hip_event = hip_event_st*;    // hipEvent_t
using hip_stream = hip_stream_st*;  // hipStream_t; null is the current device's null stream

// X(symbol, required|optional, result type, parameter list).
#define UMEM_HIP_SYMBOLS(X)                                                  \
  X(hipGetErrorName, required, const char*, (hip_error))                     \
  X(hipGetErrorString, required, const char*, (hip_error))                   \
  X(hipGetDeviceCount, required, hip_error, (int*))                          \
  X(hipGetDevice, required, hip_error, (int*))                               \
  X(hipSetDevice, required, hip_error, (int))                                \
  X(hipEventCreateWithFlags, required, hip_error, (hip_event*, unsigned int)) \
  X(hipEventRecord, required, hip_error, (hip_event, hip_stream))            \
  X(hipEventQuery, required, hip_error, (hip_event))                         \
  X(hipEventSynchronize, required, hip_error, (hip_event))                   \
  X(hipEventDestroy, required, hip_error, (hip_event))                       \
  X(hipHostRegister, required, hip_error, (void*, std::size_t, unsigned int)) \
  X(hipHostUnregister, required, hip_error, (void*))                          \
  X(hipPointerGetAttributes, required, hip_error,                             \
    (hip_compat::pointer_attributes*, const void*))

// The entry points; null only for a missing optional symbol.
struct hip_functions {
#define UMEM_HIP_MEMBER(symbol, need, result, params) result(*symbol) params = nullptr;
  UMEM_HIP_SYMBOLS(UMEM_HIP_MEMBER)
#undef UMEM_HIP_MEMBER
};

// Every symbol of the table, in table order.
std::span<const runtime_symbol> hip_symbols();

// What the plain "not loaded" state says (Note [HIP only when already loaded]).
inline constexpr const char* kHipNotLoaded =
    "HIP is not loaded in this process (PyTorch for ROCm loads it)";

class hip_runtime {
 public:
  // The first of default_candidates() already loaded in this process; nullopt when none is
  // (debug log lists what was looked for), with a warning when UMEM_HIP_RUNTIME_LIB is set but
  // not loaded. Throws umem::error(runtime_error) naming the symbol and the library when a loaded
  // library lacks a required symbol.
  static std::optional<hip_runtime> find_loaded();
  // The same with an explicit candidate list (paths or sonames), tried in order; never maps one.
  static std::optional<hip_runtime> find_loaded_in(std::span<const std::string> candidates);
  // UMEM_HIP_RUNTIME_LIB, then the sonames ROCm 6, 7 and 5 ship (libamdhip64.so,
  // libamdhip64.so.6, libamdhip64.so.7, libamdhip64.so.5).
  static std::vector<std::string> default_candidates();

  // Move-only; destruction drops umem's own reference (the library stays loaded by its owner).

  const hip_functions& fn() const { return fns_; }
  // The candidate that matched, as given, and the file ld.so had mapped.
  const std::string& path() const { return lib_.path(); }
  const std::string& resolved_path() const { return lib_.mapped_path(); }

  // "hipErrorNotReady (device not ready)", or the number when HIP has no name for it.
  std::string result_text(hip_error r) const;
  // Throws umem::error(runtime_error) "<call> failed: hipError... (text) (HIP <path>)" unless
  // `r` is hipSuccess.
  void check(hip_error r, const char* call) const;

 private:
  explicit hip_runtime(opened_library lib);

  library_reference lib_;
  hip_functions fns_;
};

}  // namespace umem::hip
