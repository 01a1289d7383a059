// Numeric CUDA driver API constants, so umem builds without the CUDA toolkit.
//
// Note [Why numbers instead of cuda.h]
// CI has no CUDA toolkit and umem never links libcuda: the driver is dlopen'd (cuda_driver.hpp).
// The enum values below are stable ABI of the driver API. They were read from CUDA 13.0's
// cuda.h (CUDA_VERSION 13000) and, where the toolkit is installed, cuda_header_check.cpp
// static_asserts every one against it. CUdevice_attribute values unknown to an older driver are
// answered with CUDA_ERROR_INVALID_VALUE: that is the "unknown" signal discovery uses.
#pragma once

#include <cstdint>

namespace umem::cuda::cuda_compat {

// CUresult.
namespace result {
inline constexpr int success = 0;
inline constexpr int invalid_value = 1;
inline constexpr int out_of_memory = 2;
inline constexpr int not_initialized = 3;
inline constexpr int deinitialized = 4;
inline constexpr int stub_library = 34;
inline constexpr int no_device = 100;
inline constexpr int invalid_device = 101;
inline constexpr int invalid_context = 201;
inline constexpr int invalid_handle = 400;
inline constexpr int not_ready = 600;
inline constexpr int host_memory_already_registered = 712;
inline constexpr int host_memory_not_registered = 713;
inline constexpr int not_permitted = 800;
inline constexpr int not_supported = 801;
inline constexpr int unknown = 999;
}  // namespace result

// CUdevice_attribute.
namespace attribute {
inline constexpr int multiprocessor_count = 16;
inline constexpr int integrated = 18;
inline constexpr int can_map_host_memory = 19;
inline constexpr int unified_addressing = 41;
inline constexpr int compute_capability_major = 75;
inline constexpr int compute_capability_minor = 76;
inline constexpr int managed_memory = 83;
inline constexpr int pageable_memory_access = 88;
inline constexpr int concurrent_managed_access = 89;
inline constexpr int can_use_host_pointer_for_registered_mem = 91;
inline constexpr int host_register_supported = 99;
inline constexpr int pageable_memory_access_uses_host_page_tables = 100;
inline constexpr int direct_managed_mem_access_from_host = 101;
// cuMemAddressReserve / cuMemCreate / cuMemMap work on this device (CUDA >= 10.2).
inline constexpr int virtual_memory_management_supported = 102;
inline constexpr int host_numa_id = 134;  // CUDA >= 12.2
}  // namespace attribute

// cuMemHostRegister flags (CU_MEMHOSTREGISTER_*).
namespace host_register {
inline constexpr unsigned portable = 0x01;   // pinned for every context, not only the current
inline constexpr unsigned devicemap = 0x02;  // mapped into the GPU's address space
inline constexpr unsigned iomemory = 0x04;
inline constexpr unsigned read_only = 0x08;
}  // namespace host_register

// cuEventCreate flags (CU_EVENT_*).
namespace event_flag {
inline constexpr unsigned disable_timing = 0x2;  // the cheapest event: ordering only
}  // namespace event_flag

// CUstreamCaptureMode, exchanged with cuThreadExchangeStreamCaptureMode.
namespace stream_capture_mode {
inline constexpr int global = 0;        // the default: unsafe calls during any capture fail
inline constexpr int thread_local_ = 1;  // only captures this thread began are checked
inline constexpr int relaxed = 2;       // this thread's unsafe calls are not checked
}  // namespace stream_capture_mode

// The virtual memory management API (cuMemCreate, cuMemMap, cuMemSetAccess), CUDA >= 10.2:
// CUmemAllocationType, CUmemAllocationHandleType, CUmemLocationType, CUmemAccess_flags and
// CUmemAllocationGranularity_flags.
namespace vmm {
inline constexpr int allocation_type_pinned = 1;  // device memory that never migrates
inline constexpr int handle_type_none = 0;        // not exportable to other processes
inline constexpr int location_type_device = 1;    // CUmemLocation::id is a device ordinal
inline constexpr int access_read_write = 3;       // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int granularity_minimum = 0;     // what cuMemCreate and cuMemMap require
}  // namespace vmm

inline constexpr int pci_bus_id_size = 32;  // cuDeviceGetPCIBusId buffer (13 chars + NUL needed)
inline constexpr int device_name_size = 256;

}  // namespace umem::cuda::cuda_compat
