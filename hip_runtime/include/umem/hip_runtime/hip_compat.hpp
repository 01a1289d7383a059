// Numeric HIP runtime API constants, so umem builds without ROCm's HIP headers.
//
// Note [Why numbers instead of hip_runtime_api.h]
// umem never links or loads HIP itself (hip_runtime.hpp), and CI has no HIP headers. The values
// below are stable ABI of the HIP runtime API, read from ROCm/HIP include/hip/hip_runtime_api.h:
// the hipError_t enum (hipSuccess = 0, hipErrorNotReady = 600, ...), the hipEventCreateWithFlags
// flags (#define hipEventDisableTiming 0x2, ...), the hipHostRegister flags and the layout of
// hipPointerAttribute_t. CUDA uses the same numbers for the same meanings (cuda_compat.hpp),
// which HIP keeps on purpose.
#pragma once

namespace umem::hip::hip_compat {

// hipError_t.
namespace result {
inline constexpr int success = 0;             // hipSuccess
inline constexpr int invalid_value = 1;       // hipErrorInvalidValue
inline constexpr int out_of_memory = 2;       // hipErrorOutOfMemory (hipErrorMemoryAllocation)
inline constexpr int invalid_device = 101;    // hipErrorInvalidDevice
inline constexpr int invalid_handle = 400;    // hipErrorInvalidHandle (hipErrorInvalidResourceHandle)
inline constexpr int not_ready = 600;         // hipErrorNotReady: queued work has not completed
inline constexpr int launch_failure = 719;    // hipErrorLaunchFailure: a kernel faulted
inline constexpr int unknown = 999;           // hipErrorUnknown
}  // namespace result

// Flags of hipEventCreateWithFlags.
namespace event_flag {
inline constexpr unsigned default_flags = 0x0;   // hipEventDefault
inline constexpr unsigned blocking_sync = 0x1;   // hipEventBlockingSync
inline constexpr unsigned disable_timing = 0x2;  // hipEventDisableTiming
inline constexpr unsigned interprocess = 0x4;    // hipEventInterprocess
}  // namespace event_flag

// Flags of hipHostRegister.
namespace host_register {
inline constexpr unsigned portable = 0x1;  // hipHostRegisterPortable: every device
inline constexpr unsigned mapped = 0x2;    // hipHostRegisterMapped: a device address
}  // namespace host_register

// hipPointerAttribute_t, as hipPointerGetAttributes fills it (the same layout in ROCm 5, where the
// first member is a union of `memoryType` and `type`, and in ROCm 6 and 7). The hipMemoryType
// numbers differ between those releases, so umem reads only devicePointer.
struct pointer_attributes {
  int type = 0;
  int device = 0;
  void* device_pointer = nullptr;
  void* host_pointer = nullptr;
  int is_managed = 0;
  unsigned allocation_flags = 0;
};

}  // namespace umem::hip::hip_compat
