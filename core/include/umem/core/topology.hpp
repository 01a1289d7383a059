// The topology model: plain data describing what the CPU and GPU of a node can use.
//
// Note [Model vs discovery]
// Nothing in this header knows where the data came from. Discovery backends fill it: the live
// machine (ROCr through hsa_runtime/, KFD sysfs, hwloc), a JSON snapshot (core/snapshot.hpp), or
// text imports (importers/: rocminfo, numactl --hardware). Consumers (umtopo, the allocator) read
// only this model. Fields a backend cannot know stay std::nullopt rather than being guessed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace umem {

// The snapshot schema's version: bump it with every serialized field added or changed
// (Note [Snapshot schema] in core/src/snapshot.cpp lists what each version added).
inline constexpr int topology_schema_version = 2;

enum class agent_kind { cpu, gpu, other };

// HSA memory segment of a pool (hsa_amd_segment_t values).
enum class pool_segment { global = 0, readonly = 1, private_ = 2, group = 3 };

// HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_* bits, stable ABI across ROCr versions.
namespace pool_flag {
inline constexpr std::uint32_t kernarg_init = 1u;
inline constexpr std::uint32_t fine_grained = 2u;
inline constexpr std::uint32_t coarse_grained = 4u;
inline constexpr std::uint32_t extended_scope_fine_grained = 8u;
}  // namespace pool_flag

// The coherence a GLOBAL pool gives between CPU and GPU.
enum class coherence { fine, coarse, extended_fine, unknown };

// hsa_amd_memory_pool_location_t (ROCr >= 5.5).
enum class pool_location { cpu = 0, gpu = 1 };

struct memory_pool {
  pool_segment segment = pool_segment::global;
  std::uint32_t global_flags = 0;  // pool_flag bits; 0 for non-GLOBAL segments
  std::uint64_t size_bytes = 0;
  bool alloc_allowed = false;
  std::uint64_t alloc_granule = 0;
  std::optional<std::uint64_t> alloc_rec_granule;  // ROCr >= 6.0
  std::uint64_t alloc_alignment = 0;
  bool accessible_by_all = false;
  std::optional<std::uint64_t> alloc_max_size;
  std::optional<pool_location> location;  // ROCr >= 5.5

  bool is_global() const { return segment == pool_segment::global; }
  bool is_kernarg() const { return (global_flags & pool_flag::kernarg_init) != 0; }
  coherence coherence_kind() const;
  bool operator==(const memory_pool&) const = default;
};

// What the CUDA driver says about one NVIDIA GPU (cuda_runtime/, the CUDA backend). Attribute
// numbers are CUdevice_attribute values (cuda_runtime/.../cuda_compat.hpp); an attribute the
// driver does not know stays nullopt.
struct cuda_device_info {
  std::uint32_t ordinal = 0;  // CUdevice ordinal (the agent's kfd_node is only its model key)
  std::uint32_t cc_major = 0, cc_minor = 0;  // compute capability (75, 76)
  std::uint64_t total_memory_bytes = 0;      // cuDeviceTotalMem
  std::optional<bool> integrated;                          // 18: shares memory with the host
  std::optional<bool> can_map_host_memory;                 // 19: cuMemHostRegister DEVICEMAP
  std::optional<bool> unified_addressing;                  // 41
  std::optional<bool> managed_memory;                      // 83
  std::optional<bool> pageable_memory_access;              // 88: HMM / ATS, no registration
  std::optional<bool> concurrent_managed_access;           // 89
  std::optional<bool> can_use_host_pointer_for_registered_mem;  // 91: device ptr == host ptr
  std::optional<bool> host_register_supported;             // 99
  std::optional<bool> pageable_memory_access_uses_host_page_tables;  // 100: ATS (Grace)
  std::optional<bool> direct_managed_mem_access_from_host;  // 101
  std::optional<int> host_numa_id;  // 134 (CUDA >= 12.2); nullopt also when the driver says -1
  bool operator==(const cuda_device_info&) const = default;
};

struct agent {
  agent_kind kind = agent_kind::other;
  std::string name;            // "gfx942", or the CPU model
  std::string marketing_name;  // "AMD Instinct MI300A"
  std::string vendor_name;
  std::string uuid;
  std::uint32_t kfd_node = 0;  // KFD topology node id ("Node:" in rocminfo)
  std::vector<std::string> isas;  // full ISA names, e.g. amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
  std::optional<bool> is_apu;     // HSA_AMD_AGENT_INFO_MEMORY_PROPERTIES bit 1 (ROCr >= 6.1)
  std::optional<bool> coherent_host_access;
  std::uint32_t compute_units = 0;
  std::uint32_t simds_per_cu = 0;
  std::uint32_t shader_engines = 0;
  std::optional<std::uint32_t> num_xcc;  // ROCr >= 6.2
  std::uint32_t chip_id = 0;
  std::uint32_t bdfid = 0;                   // PCI bus<<8 | device<<3 | function
  std::optional<std::uint32_t> pci_domain;   // not printed by rocminfo
  std::optional<std::uint32_t> nearest_cpu_kfd_node;  // ROCr >= 6.1 (NEAREST_CPU)
  std::vector<memory_pool> pools;
  // Added for the CUDA backend: set only for agents discovered through the CUDA driver. Their
  // kfd_node is a model key (CUDA agents are numbered after the agents already in the model).
  std::optional<cuda_device_info> cuda;

  // "xnack+" / "xnack-" suffix of the first GPU ISA; nullopt if the ISA does not say.
  std::optional<bool> isa_xnack() const;
  // "0000:02:00.0" from pci_domain (0 if unknown) and bdfid.
  std::string pci_address() const;
  bool operator==(const agent&) const = default;
};

// What the HSA runtime says about the whole system.
enum class runtime_state {
  not_probed,     // no backend looked (e.g. topology from numactl text only)
  available,      // hsa_init succeeded
  no_library,     // libhsa-runtime64 could not be loaded
  no_driver,      // library loaded, but /dev/kfd is absent or hsa_init reports no driver
  init_failed,    // hsa_init failed for another reason
  imported,       // filled from a text import (rocminfo), not a live runtime
};

struct hsa_system_info {
  runtime_state state = runtime_state::not_probed;
  std::string state_reason;  // human sentence: why the state is what it is
  std::string library_path;  // the libhsa-runtime64 that was loaded
  std::optional<std::uint16_t> version_major, version_minor;          // HSA_SYSTEM_INFO_VERSION_*
  std::optional<std::uint16_t> ext_version_major, ext_version_minor;  // ROCr >= 6.1
  std::optional<bool> xnack_enabled;                // 0x206 (ROCr >= 6.1), else derived
  std::optional<bool> svm_supported;                // 0x201
  std::optional<bool> svm_accessible_by_default;    // 0x202
  std::optional<bool> virtual_mem_api_supported;    // 0x205 (ROCr >= 6.0)
  std::optional<bool> dmabuf_supported;             // 0x204 (ROCr >= 5.6)
  std::optional<bool> mwaitx_enabled;               // 0x203 (ROCr >= 5.6)
  bool operator==(const hsa_system_info&) const = default;
};

// What the CUDA driver (libcuda.so.1) says about the whole system; not_probed unless the CUDA
// backend looked. Reuses runtime_state: no_library (libcuda not loadable), no_driver (cuInit:
// CUDA_ERROR_NO_DEVICE), init_failed (any other cuInit error), available.
struct cuda_system_info {
  runtime_state state = runtime_state::not_probed;
  std::string state_reason;
  std::string library_path;
  std::optional<int> driver_version;  // cuDriverGetVersion: 1000 * major + 10 * minor
  bool operator==(const cuda_system_info&) const = default;
};

// The GPU backend the process selected (machine/gpu_runtime_selection.hpp) and why. An empty name: no
// selection was made (a model read from captures or a snapshot of one).
struct gpu_backend_info {
  std::string name;  // "rocr", "cuda" or "none"
  std::string reason;
  bool operator==(const gpu_backend_info&) const = default;
};

struct numa_node {
  int os_index = 0;
  std::vector<unsigned> cpus;  // OS CPU indices, ascending
  std::uint64_t memory_total_bytes = 0;
  std::optional<std::uint64_t> memory_free_bytes;
  std::optional<int> package;  // socket index, when known
  bool operator==(const numa_node&) const = default;
};

struct numa_topology {
  std::vector<numa_node> nodes;  // ascending os_index
  // distances[i][j] between nodes[i] and nodes[j] (ACPI SLIT units, 10 = local); empty if unknown.
  std::vector<std::vector<std::uint32_t>> distances;
  bool operator==(const numa_topology&) const = default;
};

struct kfd_mem_bank {
  std::uint32_t heap_type = 0;  // HSA_HEAPTYPE_*: 0 SYSTEM, 1 FB_PUBLIC, 2 FB_PRIVATE, ...
  std::uint64_t size_bytes = 0;
  std::uint32_t flags = 0;
  std::uint32_t width = 0;
  std::uint32_t mem_clk_max = 0;
  bool operator==(const kfd_mem_bank&) const = default;
};

struct kfd_io_link {
  std::uint32_t type = 0;  // HSA_IOLINKTYPE_*: 2 PCIe, 11 XGMI
  std::uint32_t node_from = 0;
  std::uint32_t node_to = 0;
  std::uint32_t weight = 0;
  std::uint32_t min_bandwidth = 0, max_bandwidth = 0;  // MB/s
  std::uint32_t flags = 0;
  bool operator==(const kfd_io_link&) const = default;
};

// One node of /sys/class/kfd/kfd/topology/nodes.
struct kfd_node {
  std::uint32_t id = 0;
  std::string name;
  std::uint64_t gpu_id = 0;  // 0 for CPU nodes
  std::map<std::string, std::uint64_t> properties;  // every "key value" line of properties
  std::vector<kfd_mem_bank> mem_banks;
  std::vector<kfd_io_link> io_links;

  bool is_gpu() const;  // simd_count > 0
  std::optional<std::uint64_t> property(const std::string& key) const;
  bool operator==(const kfd_node&) const = default;
};

enum class iommu_mode { unknown, off, passthrough, translated };

// Driver and kernel knobs that decide what memory the GPU may use.
struct kernel_knobs {
  std::optional<int> amdgpu_noretry;              // /sys/module/amdgpu/parameters/noretry
  std::string ttm_module;                         // "amdttm" (AMD DKMS) or "ttm" (upstream); empty if neither
  std::optional<std::uint64_t> ttm_pages_limit;   // 4 KiB pages
  std::optional<std::uint64_t> ttm_page_pool_size;
  std::optional<std::string> thp_enabled;         // the bracketed choice: "always", "madvise", "never"
  std::optional<std::string> thp_defrag;
  std::optional<int> numa_balancing;              // /proc/sys/kernel/numa_balancing
  std::optional<int> compaction_proactiveness;    // /proc/sys/vm/compaction_proactiveness
  std::optional<int> compact_unevictable_allowed;
  iommu_mode iommu = iommu_mode::unknown;
  std::string iommu_evidence;                     // what decided `iommu`
  std::optional<std::uint64_t> mem_total_bytes;   // MemTotal of /proc/meminfo
  bool operator==(const kernel_knobs&) const = default;
};

// How a GPU agent was placed on a NUMA node.
struct gpu_numa_binding {
  std::uint32_t gpu_kfd_node = 0;
  std::optional<int> numa_node;  // nullopt: not local to any node
  std::string method;            // e.g. "rocr-nearest-cpu", "kfd-io-link", "pci-sysfs", "kfd-order"
  std::string evidence;          // one sentence a human can check
  bool operator==(const gpu_numa_binding&) const = default;
};

struct topology {
  int schema_version = topology_schema_version;
  std::vector<std::string> sources;  // which backends filled this model, in order
  std::string hostname;
  hsa_system_info hsa;
  std::vector<agent> agents;  // in HSA enumeration order
  numa_topology numa;
  std::vector<kfd_node> kfd_nodes;
  kernel_knobs knobs;
  std::vector<gpu_numa_binding> gpu_numa;
  // Added with the GPU backend seam (schema version 2).
  cuda_system_info cuda;
  gpu_backend_info gpu_backend;

  std::vector<const agent*> gpus() const;
  std::vector<const agent*> cpus() const;
  const agent* find_agent_by_kfd_node(std::uint32_t kfd_node) const;
  const numa_node* find_numa_node(int os_index) const;
  // XNACK as the runtime reports it, else as the GPU ISAs say; nullopt if nothing says.
  std::optional<bool> xnack_enabled() const;
  bool operator==(const topology&) const = default;
};

const char* to_string(agent_kind);
const char* to_string(pool_segment);
// "fine", "coarse", "extended_fine" (the spelling UMEM_ALLOC_CONF and the C ABI take), "unknown".
const char* to_string(coherence);
// The coherence to_string() names: fine, coarse or extended_fine. Throws umem::error
// (invalid_argument) naming the text and the accepted names for anything else.
coherence parse_coherence(std::string_view text);
const char* to_string(runtime_state);
const char* to_string(iommu_mode);
const char* to_string(pool_location);

}  // namespace umem
