// The HIP runtime API as the double serves it: the C types of its entry points and the numbers of
// hip_runtime_api.h (ROCm/rocm-systems projects/hip/include/hip/hip_runtime_api.h, 2026; the same
// values in ROCm 6.x). The double spells them itself, apart from umem's own hip_compat.hpp, so that
// it stays a stand-in for HIP and not a mirror of what umem believes about HIP.
#pragma once

#include <cstddef>

namespace umem::hip_double {

using hip_error = int;  // hipError_t (an enum of non-negative values)
struct hip_event_st;
struct hip_stream_st;
using hip_event = hip_event_st*;    // hipEvent_t
using hip_stream = hip_stream_st*;  // hipStream_t; null is the current device's null stream

// hipError_t.
namespace result {
inline constexpr hip_error success = 0;                   // hipSuccess
inline constexpr hip_error invalid_value = 1;             // hipErrorInvalidValue
inline constexpr hip_error out_of_memory = 2;             // hipErrorOutOfMemory
inline constexpr hip_error invalid_memcpy_direction = 21;  // hipErrorInvalidMemcpyDirection
inline constexpr hip_error no_device = 100;               // hipErrorNoDevice
inline constexpr hip_error invalid_device = 101;          // hipErrorInvalidDevice
inline constexpr hip_error invalid_handle = 400;          // hipErrorInvalidHandle
inline constexpr hip_error not_found = 500;               // hipErrorNotFound
inline constexpr hip_error not_ready = 600;               // hipErrorNotReady
inline constexpr hip_error host_memory_already_registered = 712;
inline constexpr hip_error host_memory_not_registered = 713;
inline constexpr hip_error launch_failure = 719;  // hipErrorLaunchFailure
inline constexpr hip_error unknown = 999;         // hipErrorUnknown
}  // namespace result

// hipEventCreateWithFlags flags.
namespace event_flag {
inline constexpr unsigned blocking_sync = 0x1;   // hipEventBlockingSync
inline constexpr unsigned disable_timing = 0x2;  // hipEventDisableTiming
inline constexpr unsigned interprocess = 0x4;    // hipEventInterprocess
}  // namespace event_flag

// hipMemcpyKind.
namespace memcpy_kind {
inline constexpr int host_to_host = 0;
inline constexpr int host_to_device = 1;
inline constexpr int device_to_host = 2;
inline constexpr int device_to_device = 3;
inline constexpr int default_kind = 4;                  // hipMemcpyDefault
inline constexpr int device_to_device_no_cu = 1024;     // hipMemcpyDeviceToDeviceNoCU
}  // namespace memcpy_kind

// hipMemoryType (ROCm 6 numbering; ROCm 5 numbered Host 0, Device 1 and had no Unregistered).
namespace memory_type {
inline constexpr int unregistered = 0;
inline constexpr int host = 1;
inline constexpr int device = 2;
inline constexpr int managed = 3;
}  // namespace memory_type

inline constexpr int invalid_device_id = -2;  // hipInvalidDeviceId ((int)-2)

// hipHostMalloc / hipHostAlloc flags.
namespace host_alloc {
inline constexpr unsigned portable = 0x1;          // hipHostAllocPortable
inline constexpr unsigned mapped = 0x2;            // hipHostAllocMapped
inline constexpr unsigned write_combined = 0x4;    // hipHostAllocWriteCombined
inline constexpr unsigned uncached = 0x10000000;   // hipHostMallocUncached
inline constexpr unsigned numa_user = 0x20000000;  // hipHostMallocNumaUser
inline constexpr unsigned coherent = 0x40000000;   // hipHostMallocCoherent
inline constexpr unsigned non_coherent = 0x80000000u;  // hipHostMallocNonCoherent
}  // namespace host_alloc

// hipHostRegister flags.
namespace host_register {
inline constexpr unsigned portable = 0x1;             // hipHostRegisterPortable
inline constexpr unsigned mapped = 0x2;               // hipHostRegisterMapped
inline constexpr unsigned io_memory = 0x4;            // hipHostRegisterIoMemory
inline constexpr unsigned coarse_grained = 0x8;       // hipExtHostRegisterCoarseGrained
inline constexpr unsigned uncached = 0x80000000u;     // hipExtHostRegisterUncached
}  // namespace host_register

// hipMallocManaged flags.
namespace attach_flag {
inline constexpr unsigned global = 0x1;  // hipMemAttachGlobal
inline constexpr unsigned host = 0x2;    // hipMemAttachHost
}  // namespace attach_flag

// hipPointerAttribute_t: the same layout in ROCm 5 (where the first member is a union of
// memoryType and type) and in ROCm 6 and 7.
struct pointer_attributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
  int is_managed;
  unsigned allocation_flags;
};

}  // namespace umem::hip_double
