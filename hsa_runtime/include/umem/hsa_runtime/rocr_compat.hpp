// Numeric ROCr (HSA runtime) constants, valid for every ROCr release from 5.2.3 to 7.x.
//
// Note [Why numbers instead of the HSA enums]
// Debian ships the 5.2.3 headers, which lack every attribute newer than 5.2.3 (MEMORY_PROPERTIES,
// NUM_XCC, XNACK_ENABLED, pool LOCATION, ...). The enum values are stable ABI, so umem passes
// them as plain integers: the function table (rocr_library.hpp) takes uint32_t attributes, which
// is ABI-identical to the 32-bit HSA enums and avoids casting 0xA1xx into an enum whose 5.2.3
// range ends at 31 (rejected in constant expressions by newer compilers). A runtime that does not
// know an attribute answers status::invalid_argument: that is the "unknown" signal.
// Values are those of the 2025 ROCr headers (docs/rocm-runtime.md §1).
#pragma once

#include <cstdint>

namespace umem::hsa::rocr_compat {

// hsa_status_t, plus the AMD extension codes (which are small decimal numbers).
namespace status {
inline constexpr std::uint32_t success = 0x0;
inline constexpr std::uint32_t info_break = 0x1;  // an iteration callback asked to stop
inline constexpr std::uint32_t error = 0x1000;
inline constexpr std::uint32_t invalid_argument = 0x1001;
inline constexpr std::uint32_t invalid_allocation = 0x1003;
inline constexpr std::uint32_t invalid_agent = 0x1004;
inline constexpr std::uint32_t invalid_signal = 0x1006;
inline constexpr std::uint32_t out_of_resources = 0x1008;  // also: no /dev/kfd at hsa_init
inline constexpr std::uint32_t not_initialized = 0x100B;
inline constexpr std::uint32_t incompatible_arguments = 0x100D;
inline constexpr std::uint32_t invalid_isa = 0x100F;
inline constexpr std::uint32_t invalid_memory_pool = 40;  // HSA_STATUS_ERROR_INVALID_MEMORY_POOL
}  // namespace status

// hsa_system_info_t (hsa_system_get_info).
namespace system_info {
inline constexpr std::uint32_t version_major = 0;  // uint16_t
inline constexpr std::uint32_t version_minor = 1;  // uint16_t
inline constexpr std::uint32_t build_version = 0x200;              // const char*
inline constexpr std::uint32_t svm_supported = 0x201;              // bool
inline constexpr std::uint32_t svm_accessible_by_default = 0x202;  // bool
inline constexpr std::uint32_t mwaitx_enabled = 0x203;             // bool, ROCr >= 5.6
inline constexpr std::uint32_t dmabuf_supported = 0x204;           // bool, ROCr >= 5.6
inline constexpr std::uint32_t virtual_mem_api_supported = 0x205;  // bool, ROCr >= 6.0
inline constexpr std::uint32_t xnack_enabled = 0x206;              // bool, ROCr >= 6.0
inline constexpr std::uint32_t ext_version_major = 0x207;          // uint16_t, ROCr >= 6.1
inline constexpr std::uint32_t ext_version_minor = 0x208;          // uint16_t, ROCr >= 6.1
}  // namespace system_info

// hsa_agent_info_t and the AMD agent attributes (hsa_agent_get_info).
namespace agent_info {
inline constexpr std::uint32_t name = 0;         // char[64]
inline constexpr std::uint32_t vendor_name = 1;  // char[64]
inline constexpr std::uint32_t node = 16;        // uint32_t
inline constexpr std::uint32_t device = 17;      // hsa_device_type_t
inline constexpr std::uint32_t chip_id = 0xA000;                 // uint32_t
inline constexpr std::uint32_t compute_unit_count = 0xA002;      // uint32_t
inline constexpr std::uint32_t driver_node_id = 0xA004;          // uint32_t: KFD topology node
inline constexpr std::uint32_t bdfid = 0xA006;                   // uint32_t
inline constexpr std::uint32_t product_name = 0xA009;            // char[64]
inline constexpr std::uint32_t num_simds_per_cu = 0xA00B;        // uint32_t
inline constexpr std::uint32_t num_shader_engines = 0xA00C;      // uint32_t
inline constexpr std::uint32_t domain = 0xA00F;                  // uint32_t: PCI domain
inline constexpr std::uint32_t uuid = 0xA011;                    // char[21] including NUL
inline constexpr std::uint32_t svm_direct_host_access = 0xA013;  // bool
inline constexpr std::uint32_t memory_avail = 0xA015;            // uint64_t, after ROCr 5.2.3
inline constexpr std::uint32_t num_xcc = 0xA111;                 // uint32_t, ROCr >= 5.7
inline constexpr std::uint32_t driver_uid = 0xA112;              // uint32_t, ROCr >= 5.7
inline constexpr std::uint32_t nearest_cpu = 0xA113;             // hsa_agent_t, ROCr >= 6.0
inline constexpr std::uint32_t memory_properties = 0xA114;       // uint8_t[8], ROCr >= 6.1
}  // namespace agent_info

inline constexpr std::uint32_t agent_name_size = 64;  // NAME, VENDOR_NAME, PRODUCT_NAME buffers
inline constexpr std::uint32_t agent_uuid_size = 21;

// hsa_device_type_t.
namespace device_type {
inline constexpr std::uint32_t cpu = 0;
inline constexpr std::uint32_t gpu = 1;
}  // namespace device_type

// HSA_AMD_MEMORY_PROPERTY_AGENT_IS_APU is a BIT INDEX into the 8-byte MEMORY_PROPERTIES value:
// ROCr sets byte 0, bit 1 (0x02). Testing byte0 & 1 is wrong (docs/rocm-runtime.md §1.1).
inline constexpr std::uint32_t memory_property_is_apu_bit = 1;
inline constexpr bool flag_isset64(const std::uint8_t (&value)[8], std::uint32_t bit) {
  return (value[bit / 8] & (1u << (bit % 8))) != 0;
}

// hsa_isa_info_t (hsa_isa_get_info_alt).
namespace isa_info {
inline constexpr std::uint32_t name_length = 0;  // uint32_t
inline constexpr std::uint32_t name = 1;         // char[name_length]
}  // namespace isa_info

// hsa_amd_memory_pool_info_t (hsa_amd_memory_pool_get_info).
namespace pool_info {
inline constexpr std::uint32_t segment = 0;             // hsa_amd_segment_t
inline constexpr std::uint32_t global_flags = 1;        // uint32_t
inline constexpr std::uint32_t size = 2;                // size_t
inline constexpr std::uint32_t alloc_allowed = 5;       // bool
inline constexpr std::uint32_t alloc_granule = 6;       // size_t
inline constexpr std::uint32_t alloc_alignment = 7;     // size_t
inline constexpr std::uint32_t accessible_by_all = 15;  // bool
inline constexpr std::uint32_t alloc_max_size = 16;     // size_t
inline constexpr std::uint32_t location = 17;           // pool_location value, ROCr >= 5.5
inline constexpr std::uint32_t alloc_rec_granule = 18;  // size_t, ROCr >= 6.0
}  // namespace pool_info

// hsa_amd_agent_memory_pool_info_t and hsa_amd_memory_pool_access_t.
namespace agent_pool_info {
inline constexpr std::uint32_t access = 0;
}  // namespace agent_pool_info
namespace pool_access {
inline constexpr std::uint32_t never_allowed = 0;
inline constexpr std::uint32_t allowed_by_default = 1;
inline constexpr std::uint32_t disallowed_by_default = 2;
}  // namespace pool_access

// hsa_amd_memory_pool_allocate flags. 5.2.3 accepts only 0, 5.3-6.1 only 0 or pcie.
namespace alloc_flag {
inline constexpr std::uint32_t pcie = 1u << 0;        // ROCr >= 5.3
inline constexpr std::uint32_t contiguous = 1u << 1;  // ROCr >= 6.2
inline constexpr std::uint32_t executable = 1u << 2;  // ROCr late 2024
}  // namespace alloc_flag

// hsa_amd_svm_attribute_t and hsa_amd_svm_model_t.
namespace svm_attrib {
inline constexpr std::uint64_t global_flag = 0;
inline constexpr std::uint64_t read_only = 1;
inline constexpr std::uint64_t hive_local = 2;
inline constexpr std::uint64_t migration_granularity = 3;
inline constexpr std::uint64_t preferred_location = 4;  // value: hsa_agent_t handle
inline constexpr std::uint64_t prefetch_location = 5;   // value: hsa_agent_t handle
inline constexpr std::uint64_t read_mostly = 6;
inline constexpr std::uint64_t gpu_exec = 7;  // ROCr >= 5.4
inline constexpr std::uint64_t agent_accessible = 0x200;
inline constexpr std::uint64_t agent_accessible_in_place = 0x201;
inline constexpr std::uint64_t agent_no_access = 0x202;
inline constexpr std::uint64_t access_query = 0x203;
}  // namespace svm_attrib
namespace svm_model {
inline constexpr std::uint64_t fine_grained = 0;
inline constexpr std::uint64_t coarse_grained = 1;
inline constexpr std::uint64_t indeterminate = 2;
}  // namespace svm_model

// hsa_amd_pointer_type_t.
namespace pointer_type {
inline constexpr std::uint32_t unknown = 0;
inline constexpr std::uint32_t hsa = 1;     // pool allocation
inline constexpr std::uint32_t locked = 2;  // hsa_amd_memory_lock'ed host memory
inline constexpr std::uint32_t graphics = 3;
inline constexpr std::uint32_t ipc = 4;
inline constexpr std::uint32_t reserved_addr = 5;  // VMM-reserved, no backing (2025)
}  // namespace pointer_type

// hsa_signal_condition_t and hsa_wait_state_t.
namespace signal_condition {
inline constexpr std::uint32_t eq = 0;
inline constexpr std::uint32_t ne = 1;
inline constexpr std::uint32_t lt = 2;
inline constexpr std::uint32_t gte = 3;
}  // namespace signal_condition
namespace wait_state {
inline constexpr std::uint32_t blocked = 0;
inline constexpr std::uint32_t active = 1;
}  // namespace wait_state

// hsa_access_permission_t (VMM).
namespace access_permission {
inline constexpr std::uint32_t none = 0;  // ROCr >= 6.0
inline constexpr std::uint32_t ro = 1;
inline constexpr std::uint32_t wo = 2;
inline constexpr std::uint32_t rw = 3;
}  // namespace access_permission

}  // namespace umem::hsa::rocr_compat
