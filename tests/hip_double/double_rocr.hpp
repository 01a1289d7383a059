// The ROCr the HIP double runs over (umem_hip_double_attach_rocr): its entry points, taken from the
// mapped libhsa-runtime64, and HIP's devices as clr builds them from ROCr's agents and pools.
#pragma once

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace umem::hip_double {

// The libhsa-runtime64 entry points the double calls, as clr calls them.
struct rocr_functions {
  decltype(&hsa_init) init = nullptr;
  decltype(&hsa_shut_down) shut_down = nullptr;
  decltype(&hsa_status_string) status_string = nullptr;
  decltype(&hsa_system_get_info) system_get_info = nullptr;
  decltype(&hsa_iterate_agents) iterate_agents = nullptr;
  decltype(&hsa_agent_get_info) agent_get_info = nullptr;
  decltype(&hsa_amd_agent_iterate_memory_pools) iterate_memory_pools = nullptr;
  decltype(&hsa_amd_memory_pool_get_info) memory_pool_get_info = nullptr;
  decltype(&hsa_amd_agent_memory_pool_get_info) agent_memory_pool_get_info = nullptr;
  decltype(&hsa_amd_memory_pool_allocate) memory_pool_allocate = nullptr;
  decltype(&hsa_amd_memory_pool_free) memory_pool_free = nullptr;
  decltype(&hsa_amd_agents_allow_access) agents_allow_access = nullptr;
  decltype(&hsa_amd_memory_lock_to_pool) memory_lock_to_pool = nullptr;
  decltype(&hsa_amd_memory_unlock) memory_unlock = nullptr;
  decltype(&hsa_amd_pointer_info) pointer_info = nullptr;
};

// One HIP device: its GPU agent and the pools clr gives it (rocdevice.cpp).
struct rocr_device {
  hsa_agent_t agent{0};
  hsa_amd_memory_pool_t gpuvm{0};           // gpuvm_segment_: hipMalloc's pool
  hsa_amd_memory_pool_t system_fine{0};     // SystemSegment(): hipHostRegister's lock pool
  hsa_amd_memory_pool_t system_coarse{0};   // SystemCoarseSegment() (0: none)
  std::size_t cpu_index = 0;                // which CPU agent's pools (setupCpuAgent)
};

struct attached_rocr {
  void* handle = nullptr;  // dlopen handle; null: not attached
  std::string path;
  int pid = 0;  // the process that attached it (hsa_init)
  rocr_functions fn;
  std::vector<rocr_device> devices;     // HIP device i = the i-th GPU agent
  std::vector<hsa_agent_t> gpu_agents;  // gpu_agents_, for allow_access
  // hmmCpuMemoryAccessible_: HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT (false when ROCr does
  // not answer, as clr leaves it).
  bool hmm_cpu_memory_accessible = false;
  bool attached() const { return handle != nullptr; }
};

// Maps, initialises and enumerates the ROCr at `path` (see umem_hip_double_attach_rocr). Empty
// on success, else why not; on failure nothing stays mapped or initialised.
std::string attach(attached_rocr& r, const char* path);
// hsa_shut_down and dlclose; `r` is unattached afterwards.
void detach(attached_rocr& r);

// ROCr's pointer type of `p` (HSA_EXT_POINTER_TYPE_*), UNKNOWN when the query fails, as clr's
// IsValidAllocation reads a zero-initialised answer.
std::uint32_t pointer_type(const attached_rocr& r, const void* p);

// "INVALID_ARGUMENT" style text of an HSA status, for messages.
std::string status_text(const attached_rocr& r, hsa_status_t st);

}  // namespace umem::hip_double
