// The real HIP runtime (libamdhip64) and its run-time compiler (libhiprtc), mapped by the hardware
// tier's HIP tests themselves, as PyTorch for ROCm maps libamdhip64 at `import torch`: dlopen with
// RTLD_NOW | RTLD_GLOBAL. The tests must map HIP before they make umem's allocator, since umem only
// uses a HIP that is already loaded (Note [HIP only when already loaded] in
// hip_runtime/include/umem/hip_runtime/hip_runtime.hpp).
//
// These tables are the tests' own, not umem's hip_runtime: the tests check umem from outside,
// with HIP's definitions (ROCm include/hip/hip_runtime_api.h and include/hip/hiprtc.h), so that a
// mistake in umem's mirror of HIP cannot hide itself. Every symbol is required: a library that
// lacks one fails the load with umem::error naming the symbol and the file (find_symbol in
// core/include/umem/core/shared_library.hpp). Mapped libraries are never closed: HIP tears itself
// down at process exit and must still be mapped then (PyTorch never unloads it either).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace umem::hw_test {

using hip_error = int;      // hipError_t (hipSuccess = 0)
using hiprtc_result = int;  // hiprtcResult (HIPRTC_SUCCESS = 0)
struct hip_stream_st;
struct hip_module_st;
struct hip_function_st;
struct hiprtc_program_st;
using hip_stream = hip_stream_st*;  // hipStream_t; null: the current device's null stream
using hip_module = hip_module_st*;
using hip_function = hip_function_st*;
using hiprtc_program = hiprtc_program_st*;

inline constexpr hip_error hip_success = 0;
inline constexpr hip_error hip_error_invalid_value = 1;  // hipErrorInvalidValue

// hipMemcpyKind.
enum class memcpy_kind : int {
  host_to_host = 0,      // hipMemcpyHostToHost
  host_to_device = 1,    // hipMemcpyHostToDevice
  device_to_host = 2,    // hipMemcpyDeviceToHost
  device_to_device = 3,  // hipMemcpyDeviceToDevice
  by_pointer = 4,        // hipMemcpyDefault: HIP infers the direction from the pointers
};
const char* to_string(memcpy_kind k);

// hipPointerAttribute_t: the same layout in ROCm 5 (first member a union of memoryType and type),
// 6 and 7. hipMemoryType's numbers changed between them, so the tests read only the pointers.
struct hip_pointer_attributes {
  int type = 0;
  int device = 0;
  void* device_pointer = nullptr;
  void* host_pointer = nullptr;
  int is_managed = 0;
  unsigned allocation_flags = 0;
};

// X(symbol, result type, parameter list). hipMemcpyKind travels as int.
#define UMEM_HW_TEST_HIP_SYMBOLS(X)                                                          \
  X(hipGetErrorName, const char*, (hip_error))                                              \
  X(hipGetErrorString, const char*, (hip_error))                                            \
  X(hipRuntimeGetVersion, hip_error, (int*))                                                \
  X(hipGetDeviceCount, hip_error, (int*))                                                   \
  X(hipSetDevice, hip_error, (int))                                                         \
  X(hipDeviceSynchronize, hip_error, ())                                                    \
  X(hipMemset, hip_error, (void*, int, std::size_t))                                        \
  X(hipMemsetAsync, hip_error, (void*, int, std::size_t, hip_stream))                       \
  X(hipMemcpy, hip_error, (void*, const void*, std::size_t, int))                           \
  X(hipMemcpyAsync, hip_error, (void*, const void*, std::size_t, int, hip_stream))          \
  X(hipStreamCreate, hip_error, (hip_stream*))                                              \
  X(hipStreamSynchronize, hip_error, (hip_stream))                                          \
  X(hipStreamDestroy, hip_error, (hip_stream))                                              \
  X(hipPointerGetAttributes, hip_error, (hip_pointer_attributes*, const void*))             \
  X(hipHostGetDevicePointer, hip_error, (void**, void*, unsigned))                          \
  X(hipModuleLoadData, hip_error, (hip_module*, const void*))                               \
  X(hipModuleGetFunction, hip_error, (hip_function*, hip_module, const char*))              \
  X(hipModuleLaunchKernel, hip_error,                                                       \
    (hip_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,    \
     hip_stream, void**, void**))                                                           \
  X(hipModuleUnload, hip_error, (hip_module))

#define UMEM_HW_TEST_HIPRTC_SYMBOLS(X)                                                       \
  X(hiprtcGetErrorString, const char*, (hiprtc_result))                                     \
  X(hiprtcCreateProgram, hiprtc_result,                                                     \
    (hiprtc_program*, const char*, const char*, int, const char**, const char**))           \
  X(hiprtcCompileProgram, hiprtc_result, (hiprtc_program, int, const char**))               \
  X(hiprtcGetProgramLogSize, hiprtc_result, (hiprtc_program, std::size_t*))                 \
  X(hiprtcGetProgramLog, hiprtc_result, (hiprtc_program, char*))                            \
  X(hiprtcGetCodeSize, hiprtc_result, (hiprtc_program, std::size_t*))                       \
  X(hiprtcGetCode, hiprtc_result, (hiprtc_program, char*))                                  \
  X(hiprtcDestroyProgram, hiprtc_result, (hiprtc_program*))

#define UMEM_HW_TEST_MEMBER(symbol, result, params) result(*symbol) params = nullptr;
struct hip_functions {
  UMEM_HW_TEST_HIP_SYMBOLS(UMEM_HW_TEST_MEMBER)
};
struct hiprtc_functions {
  UMEM_HW_TEST_HIPRTC_SYMBOLS(UMEM_HW_TEST_MEMBER)
};
#undef UMEM_HW_TEST_MEMBER

// One mapped library and its filled table; immutable after map().
template <class Functions>
struct mapped_runtime {
  Functions fn;
  std::string library;  // the file ld.so mapped
};

// Either a runtime or why there is none (every name tried, with dlerror's reason).
template <class Functions>
struct map_result {
  std::optional<mapped_runtime<Functions>> runtime;
  std::string absent;
};

// libamdhip64.so, then .so.7 and .so.6 (the names ROCm 7 and 6 install; PyTorch's wheels carry
// the same files), RTLD_NOW | RTLD_GLOBAL. Throws umem::error for a library that lacks a symbol.
map_result<hip_functions> map_hip();
// libhiprtc.so, .so.7, .so.6 (RTLD_NOW | RTLD_LOCAL: nothing else looks for its symbols).
map_result<hiprtc_functions> map_hiprtc();

// "hipErrorInvalidValue (invalid argument)", or the number where HIP has no name for it.
std::string hip_error_text(const hip_functions& fn, hip_error e);

// A code object for the current HIP device, compiled by hiprtc from `source`, or why not.
struct compiled_kernel {
  std::string code;     // the code object (hipModuleLoadData's image); empty on failure
  std::string how;      // the options used ("hiprtc's default target", "--offload-arch=...")
  std::string failure;  // the failing call, its hiprtcResult and the program log
};
// First with no --offload-arch, which hiprtc replaces with the current device's gcnArchName
// (clr hipamd/src/hiprtc/hiprtcInternal.cpp, RTCProgram::findIsa); that lookup dlopens
// libamdhip64 by a name the machine may lack, so where it fails and `fallback_target` is not
// empty ("gfx942:sramecc+:xnack-"), again with --offload-arch=<fallback_target>.
compiled_kernel compile_kernel(const hiprtc_functions& rtc, const std::string& source,
                               const std::string& fallback_target);

}  // namespace umem::hw_test
