// The CUDA driver (libcuda.so.1) as one dlopen'd function table, like rocr_library.hpp.
//
// Note [One driver table, filled once]
// umem never links libcuda: CI has no CUDA, and umem must run (degraded) where no NVIDIA driver
// exists. UMEM_CUDA_SYMBOLS is the single list of every driver entry point umem uses, with a
// required/optional column. A missing required symbol fails the load naming the symbol and the
// library; a missing optional one stays null. After load() the table never changes, so it may be
// read from any thread. Versioned entry points are named with their suffix (cuMemHostRegister_v2):
// cuda.h maps the plain names to these, and dlsym sees only the real export names.
// The function types use cu_* mirrors of the driver types (opaque handles are pointers);
// cuda_header_check.cpp checks them against cuda.h where the toolkit is installed.
//
// Environment (read through umem::env_value): UMEM_CUDA_DRIVER_LIB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "umem/core/shared_library.hpp"

namespace umem::cuda {

using cu_result = int;  // CUresult (an enum of non-negative values below 1000)
using cu_device = int;  // CUdevice
using cu_deviceptr = unsigned long long;  // CUdeviceptr (v2)
struct cu_ctx_st;
struct cu_event_st;
struct cu_stream_st;
using cu_context = cu_ctx_st*;    // CUcontext
using cu_event = cu_event_st*;    // CUevent
using cu_stream = cu_stream_st*;  // CUstream; null is the legacy default stream
struct cu_uuid {                  // CUuuid
  char bytes[16];
};
// The virtual memory management API's types (cuMemCreate / cuMemMap); enums are int here, with
// their values in cuda_compat::vmm.
using cu_mem_handle = unsigned long long;  // CUmemGenericAllocationHandle
struct cu_mem_location {                   // CUmemLocation
  int type = 0;                            // CUmemLocationType
  int id = 0;
};
struct cu_mem_allocation_prop {    // CUmemAllocationProp
  int type = 0;                    // CUmemAllocationType
  int requested_handle_types = 0;  // CUmemAllocationHandleType
  cu_mem_location location;
  void* win32_handle_meta_data = nullptr;
  struct {
    unsigned char compression_type = 0;
    unsigned char gpu_direct_rdma_capable = 0;
    unsigned short usage = 0;
    unsigned char reserved[4] = {};
  } alloc_flags;
};
struct cu_mem_access_desc {  // CUmemAccessDesc
  cu_mem_location location;
  int flags = 0;  // CUmemAccess_flags
};
// CUstreamCaptureMode is an enum (cuda_compat::stream_capture_mode); the table passes it as int.

// X(symbol, required|optional, parameter list); every entry point returns cu_result.
#define UMEM_CUDA_SYMBOLS(X)                                                       \
  X(cuInit, required, (unsigned int))                                              \
  X(cuDriverGetVersion, required, (int*))                                          \
  X(cuGetErrorName, required, (cu_result, const char**))                           \
  X(cuGetErrorString, required, (cu_result, const char**))                         \
  X(cuDeviceGetCount, required, (int*))                                            \
  X(cuDeviceGet, required, (cu_device*, int))                                      \
  X(cuDeviceGetName, required, (char*, int, cu_device))                            \
  X(cuDeviceGetAttribute, required, (int*, int, cu_device))                        \
  X(cuDeviceTotalMem_v2, required, (std::size_t*, cu_device))                      \
  X(cuDeviceGetPCIBusId, required, (char*, int, cu_device))                        \
  X(cuDevicePrimaryCtxRetain, required, (cu_context*, cu_device))                  \
  X(cuDevicePrimaryCtxRelease_v2, required, (cu_device))                           \
  X(cuCtxGetCurrent, required, (cu_context*))                                      \
  X(cuCtxSetCurrent, required, (cu_context))                                       \
  X(cuCtxSynchronize, required, ())                                                \
  X(cuMemGetInfo_v2, required, (std::size_t*, std::size_t*))                       \
  X(cuMemAlloc_v2, required, (cu_deviceptr*, std::size_t))                         \
  X(cuMemFree_v2, required, (cu_deviceptr))                                        \
  X(cuMemHostRegister_v2, required, (void*, std::size_t, unsigned int))            \
  X(cuMemHostUnregister, required, (void*))                                        \
  X(cuMemHostGetDevicePointer_v2, required, (cu_deviceptr*, void*, unsigned int))  \
  X(cuEventCreate, required, (cu_event*, unsigned int))                            \
  X(cuEventRecord, required, (cu_event, cu_stream))                                \
  X(cuEventQuery, required, (cu_event))                                            \
  X(cuEventSynchronize, required, (cu_event))                                      \
  X(cuEventDestroy_v2, required, (cu_event))                                       \
  X(cuStreamSynchronize, required, (cu_stream))                                    \
  X(cuDeviceGetUuid_v2, optional, (cu_uuid*, cu_device))                           \
  X(cuThreadExchangeStreamCaptureMode, optional, (int*))                           \
  X(cuMemGetAllocationGranularity, optional,                                       \
    (std::size_t*, const cu_mem_allocation_prop*, int))                            \
  X(cuMemAddressReserve, optional,                                                 \
    (cu_deviceptr*, std::size_t, std::size_t, cu_deviceptr, unsigned long long))   \
  X(cuMemAddressFree, optional, (cu_deviceptr, std::size_t))                       \
  X(cuMemCreate, optional,                                                         \
    (cu_mem_handle*, std::size_t, const cu_mem_allocation_prop*,                   \
     unsigned long long))                                                          \
  X(cuMemRelease, optional, (cu_mem_handle))                                       \
  X(cuMemMap, optional,                                                            \
    (cu_deviceptr, std::size_t, std::size_t, cu_mem_handle, unsigned long long))   \
  X(cuMemUnmap, optional, (cu_deviceptr, std::size_t))                             \
  X(cuMemSetAccess, optional,                                                      \
    (cu_deviceptr, std::size_t, const cu_mem_access_desc*, std::size_t))

// The entry points; null only for a missing optional symbol.
struct cuda_functions {
#define UMEM_CUDA_MEMBER(symbol, need, params) cu_result(*symbol) params = nullptr;
  UMEM_CUDA_SYMBOLS(UMEM_CUDA_MEMBER)
#undef UMEM_CUDA_MEMBER
};

// Every symbol of the table, in table order.
std::span<const runtime_symbol> cuda_symbols();

class cuda_driver {
 public:
  // Loads the first candidate of default_candidates() that dlopens. Throws umem::error:
  // runtime_unavailable listing every path tried with its dlerror when none loads;
  // runtime_error naming the symbol and path when a loaded library lacks a required symbol.
  static cuda_driver load();
  // The same with an explicit candidate list (paths or plain sonames), tried in order.
  static cuda_driver load_from(std::span<const std::string> candidates);
  // UMEM_CUDA_DRIVER_LIB, then the plain soname libcuda.so.1 for the ld.so search.
  static std::vector<std::string> default_candidates();

  cuda_driver(cuda_driver&& other) noexcept;
  cuda_driver& operator=(cuda_driver&&) = delete;
  cuda_driver(const cuda_driver&) = delete;
  cuda_driver& operator=(const cuda_driver&) = delete;
  ~cuda_driver();  // dlclose

  const cuda_functions& fn() const { return fns_; }
  // Every entry point of the virtual memory management API is there (cuMemAddressReserve,
  // cuMemCreate, cuMemMap, cuMemSetAccess and their inverses, cuMemGetAllocationGranularity;
  // drivers since CUDA 10.2 export them). Whether a device supports it is a device attribute
  // (cuda_compat::attribute::virtual_memory_management_supported).
  bool has_virtual_memory() const;
  // The candidate that loaded, as given, and the file ld.so actually mapped.
  const std::string& path() const { return path_; }
  const std::string& resolved_path() const { return resolved_path_; }

  // "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", or the number when the driver
  // has no name for it.
  std::string result_text(cu_result r) const;
  // Throws umem::error "<call> failed: CUDA_ERROR_... (text) (driver <path>)" unless `r` is
  // success: out_of_memory for CUDA_ERROR_OUT_OF_MEMORY, else runtime_error.
  void check(cu_result r, const char* call) const;

 private:
  cuda_driver(void* handle, std::string path);

  void* handle_ = nullptr;
  std::string path_;
  std::string resolved_path_;
  cuda_functions fns_;
};

}  // namespace umem::cuda
