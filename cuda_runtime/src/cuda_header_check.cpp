// Checks cuda_compat.hpp and the cuda_driver table against the CUDA toolkit's cuda.h, where one
// is installed (cuda_runtime/CMakeLists.txt defines UMEM_CHECK_AGAINST_CUDA_H); otherwise this
// file is empty. See Note [Why numbers instead of cuda.h].
#if defined(UMEM_CHECK_AGAINST_CUDA_H)

#include <cuda.h>

#include <cstddef>
#include <type_traits>

#include "umem/core/detail/signature_mirror.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::detail {
template <> struct mirror<CUresult> { using type = cuda::cu_result; };
template <> struct mirror<CUdevice_attribute> { using type = int; };
template <> struct mirror<CUcontext> { using type = cuda::cu_context; };
template <> struct mirror<CUevent> { using type = cuda::cu_event; };
template <> struct mirror<CUstream> { using type = cuda::cu_stream; };
template <> struct mirror<CUuuid> { using type = cuda::cu_uuid; };
template <> struct mirror<CUstreamCaptureMode> { using type = int; };
template <> struct mirror<CUmemAllocationProp> { using type = cuda::cu_mem_allocation_prop; };
template <> struct mirror<CUmemAccessDesc> { using type = cuda::cu_mem_access_desc; };
template <> struct mirror<CUmemAllocationGranularity_flags> { using type = int; };
}  // namespace umem::detail

namespace umem::cuda {
namespace {

namespace cc = cuda_compat;

static_assert(cc::result::success == CUDA_SUCCESS);
static_assert(cc::result::invalid_value == CUDA_ERROR_INVALID_VALUE);
static_assert(cc::result::out_of_memory == CUDA_ERROR_OUT_OF_MEMORY);
static_assert(cc::result::not_initialized == CUDA_ERROR_NOT_INITIALIZED);
static_assert(cc::result::deinitialized == CUDA_ERROR_DEINITIALIZED);
static_assert(cc::result::stub_library == CUDA_ERROR_STUB_LIBRARY);
static_assert(cc::result::no_device == CUDA_ERROR_NO_DEVICE);
static_assert(cc::result::invalid_device == CUDA_ERROR_INVALID_DEVICE);
static_assert(cc::result::invalid_context == CUDA_ERROR_INVALID_CONTEXT);
static_assert(cc::result::invalid_handle == CUDA_ERROR_INVALID_HANDLE);
static_assert(cc::result::not_ready == CUDA_ERROR_NOT_READY);
static_assert(cc::result::host_memory_already_registered ==
              CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
static_assert(cc::result::host_memory_not_registered == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
static_assert(cc::result::not_permitted == CUDA_ERROR_NOT_PERMITTED);
static_assert(cc::result::not_supported == CUDA_ERROR_NOT_SUPPORTED);
static_assert(cc::result::unknown == CUDA_ERROR_UNKNOWN);

static_assert(cc::attribute::multiprocessor_count == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
static_assert(cc::attribute::integrated == CU_DEVICE_ATTRIBUTE_INTEGRATED);
static_assert(cc::attribute::can_map_host_memory == CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
static_assert(cc::attribute::unified_addressing == CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
static_assert(cc::attribute::compute_capability_major ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(cc::attribute::compute_capability_minor ==
              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(cc::attribute::managed_memory == CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
static_assert(cc::attribute::pageable_memory_access ==
              CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
static_assert(cc::attribute::concurrent_managed_access ==
              CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
static_assert(cc::attribute::can_use_host_pointer_for_registered_mem ==
              CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
static_assert(cc::attribute::host_register_supported ==
              CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
static_assert(cc::attribute::pageable_memory_access_uses_host_page_tables ==
              CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
static_assert(cc::attribute::direct_managed_mem_access_from_host ==
              CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
static_assert(cc::attribute::host_numa_id == CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID);
static_assert(cc::attribute::virtual_memory_management_supported ==
              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);

static_assert(cc::vmm::allocation_type_pinned == CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(cc::vmm::handle_type_none == CU_MEM_HANDLE_TYPE_NONE);
static_assert(cc::vmm::location_type_device == CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(cc::vmm::access_read_write == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(cc::vmm::granularity_minimum == CU_MEM_ALLOC_GRANULARITY_MINIMUM);

static_assert(cc::host_register::portable == CU_MEMHOSTREGISTER_PORTABLE);
static_assert(cc::host_register::devicemap == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(cc::host_register::iomemory == CU_MEMHOSTREGISTER_IOMEMORY);
static_assert(cc::host_register::read_only == CU_MEMHOSTREGISTER_READ_ONLY);
static_assert(cc::event_flag::disable_timing == CU_EVENT_DISABLE_TIMING);
static_assert(cc::stream_capture_mode::global == CU_STREAM_CAPTURE_MODE_GLOBAL);
static_assert(cc::stream_capture_mode::thread_local_ == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
static_assert(cc::stream_capture_mode::relaxed == CU_STREAM_CAPTURE_MODE_RELAXED);

static_assert(sizeof(CUresult) == sizeof(cu_result));
static_assert(sizeof(CUdevice) == sizeof(cu_device));
static_assert(std::is_same_v<CUdeviceptr, cu_deviceptr>);
static_assert(sizeof(CUuuid) == sizeof(cu_uuid));
static_assert(sizeof(CUstreamCaptureMode) == sizeof(int));
static_assert(std::is_same_v<CUmemGenericAllocationHandle, cu_mem_handle>);
// The VMM structs travel by pointer: their layouts must be cuda.h's field by field.
static_assert(sizeof(CUmemLocation) == sizeof(cu_mem_location));
static_assert(offsetof(CUmemLocation, type) == offsetof(cu_mem_location, type));
static_assert(offsetof(CUmemLocation, id) == offsetof(cu_mem_location, id));
static_assert(sizeof(CUmemAllocationProp) == sizeof(cu_mem_allocation_prop));
static_assert(offsetof(CUmemAllocationProp, type) == offsetof(cu_mem_allocation_prop, type));
static_assert(offsetof(CUmemAllocationProp, requestedHandleTypes) ==
              offsetof(cu_mem_allocation_prop, requested_handle_types));
static_assert(offsetof(CUmemAllocationProp, location) ==
              offsetof(cu_mem_allocation_prop, location));
static_assert(offsetof(CUmemAllocationProp, win32HandleMetaData) ==
              offsetof(cu_mem_allocation_prop, win32_handle_meta_data));
static_assert(offsetof(CUmemAllocationProp, allocFlags) ==
              offsetof(cu_mem_allocation_prop, alloc_flags));
static_assert(sizeof(CUmemAccessDesc) == sizeof(cu_mem_access_desc));
static_assert(offsetof(CUmemAccessDesc, location) == offsetof(cu_mem_access_desc, location));
static_assert(offsetof(CUmemAccessDesc, flags) == offsetof(cu_mem_access_desc, flags));

// mirror<T> (signature_mirror.hpp): each cuda.h type of a declaration as the table spells it.
using umem::detail::mirror_t;

// cuda.h declares the versioned names (cuMemHostRegister_v2 ...) as real functions too.
#define UMEM_CUDA_CHECK(symbol, need, params)                                               \
  static_assert(std::is_same_v<mirror_t<decltype(&::symbol)>, decltype(cuda_functions::symbol)>, \
                "table signature of " #symbol " differs from cuda.h");
UMEM_CUDA_SYMBOLS(UMEM_CUDA_CHECK)
#undef UMEM_CUDA_CHECK

}  // namespace
}  // namespace umem::cuda

#endif
