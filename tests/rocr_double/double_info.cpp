// Information entry points of the double: system, agents, ISAs and memory pools of the machine.
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "double_state.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

using namespace umem::rocr_double;
namespace rc = umem::hsa::rocr_compat;

namespace {

template <class T>
hsa_status_t put(void* value, const T& v) {
  std::memcpy(value, &v, sizeof v);
  return HSA_STATUS_SUCCESS;
}
template <class T>
hsa_status_t put(void* value, const std::optional<T>& v) {
  return v ? put(value, *v) : HSA_STATUS_ERROR_INVALID_ARGUMENT;  // the snapshot does not know
}
hsa_status_t put_bool(void* value, const std::optional<bool>& v) {
  return v ? put(value, *v) : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}
// Fixed-size char[N] attributes, always NUL-terminated like ROCr's.
hsa_status_t put_string(void* value, const std::string& v, std::size_t buffer_size) {
  const std::size_t n = std::min(v.size(), buffer_size - 1);
  std::memcpy(value, v.data(), n);
  static_cast<char*>(value)[n] = '\0';
  return HSA_STATUS_SUCCESS;
}

bool is_5_2_3(const state& s) { return s.version == release::v5_2_3; }

// HSA_AMD_AGENT_INFO_MEMORY_AVAIL (uint64_t), after 5.2.3: its header ends at 0xA014.
constexpr std::uint32_t kAgentInfoMemoryAvail = 0xA015;

// The release's own answer when the snapshot carries no runtime version.
std::uint16_t default_version(const state& s, bool major, bool ext) {
  if (s.version == release::v6_4) return major ? 1 : (ext ? 6 : 14);
  return major ? 1 : (ext ? 11 : 18);
}

hsa_status_t system_info(const state& s, std::uint32_t attr, void* value) {
  namespace si = rc::system_info;
  const auto& h = s.machine.hsa;
  switch (attr) {
    // Before 6.1 ROCr reports the HSA specification version 1.1 here, not its own.
    case si::version_major:
      return put(value, is_5_2_3(s) ? std::uint16_t{1}
                                    : h.version_major.value_or(default_version(s, true, false)));
    case si::version_minor:
      return put(value, is_5_2_3(s) ? std::uint16_t{1}
                                    : h.version_minor.value_or(default_version(s, false, false)));
    case si::build_version: {
      static const char* const names[] = {"5.2.3 (umem rocr double)", "6.4 (umem rocr double)",
                                          "7.1 (umem rocr double)"};
      return put(value, names[static_cast<int>(s.version)]);
    }
    case si::svm_supported: return put_bool(value, h.svm_supported);
    case si::svm_accessible_by_default: return put_bool(value, h.svm_accessible_by_default);
  }
  if (is_5_2_3(s)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attr) {
    case si::mwaitx_enabled: return put_bool(value, h.mwaitx_enabled);
    case si::dmabuf_supported: return put_bool(value, h.dmabuf_supported);
    case si::virtual_mem_api_supported: return put_bool(value, h.virtual_mem_api_supported);
    case si::xnack_enabled: return put_bool(value, h.xnack_enabled);
    case si::ext_version_major:
      return put(value, h.ext_version_major.value_or(default_version(s, true, true)));
    case si::ext_version_minor:
      return put(value, h.ext_version_minor.value_or(default_version(s, false, true)));
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

std::uint32_t device_type(umem::agent_kind k) {
  switch (k) {
    case umem::agent_kind::cpu: return rc::device_type::cpu;
    case umem::agent_kind::gpu: return rc::device_type::gpu;
    case umem::agent_kind::other: break;
  }
  return 2;  // HSA_DEVICE_TYPE_DSP
}

hsa_status_t agent_info(const state& s, std::size_t index, std::uint32_t attr, void* value) {
  namespace ai = rc::agent_info;
  const umem::agent& a = s.machine.agents[index];
  switch (attr) {
    case ai::name: return put_string(value, a.name, rc::agent_name_size);
    case ai::vendor_name: return put_string(value, a.vendor_name, rc::agent_name_size);
    case ai::product_name: return put_string(value, a.marketing_name, rc::agent_name_size);
    case ai::uuid: return put_string(value, a.uuid, rc::agent_uuid_size);
    case ai::node:
    case ai::driver_node_id: return put(value, a.kfd_node);
    case ai::device: return put(value, device_type(a.kind));
    case ai::chip_id: return put(value, a.chip_id);
    case ai::compute_unit_count: return put(value, a.compute_units);
    case ai::bdfid: return put(value, a.bdfid);
    case ai::num_simds_per_cu: return put(value, a.simds_per_cu);
    case ai::num_shader_engines: return put(value, a.shader_engines);
    case ai::domain: return put(value, a.pci_domain);
    case ai::svm_direct_host_access: return put_bool(value, a.coherent_host_access);
  }
  if (is_5_2_3(s)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attr) {
    case ai::num_xcc: return put(value, a.num_xcc);
    case ai::nearest_cpu: {
      // ROCr answers handle 0 for CPU agents and where no CPU is nearest.
      hsa_agent_t nearest{0};
      for (std::size_t i = 0; a.nearest_cpu_kfd_node && i < s.machine.agents.size(); ++i)
        if (s.machine.agents[i].kind == umem::agent_kind::cpu &&
            s.machine.agents[i].kfd_node == *a.nearest_cpu_kfd_node)
          nearest.handle = agent_handle(i);
      return put(value, nearest);
    }
    case kAgentInfoMemoryAvail: return put(value, agent_memory_avail(s, index));
    case ai::memory_properties: {
      if (!a.is_apu) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      std::uint8_t bytes[8] = {};
      if (*a.is_apu)
        bytes[rc::memory_property_is_apu_bit / 8] |= 1u << (rc::memory_property_is_apu_bit % 8);
      std::memcpy(value, bytes, sizeof bytes);
      return HSA_STATUS_SUCCESS;
    }
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t pool_info(const state& s, const umem::memory_pool& p, std::uint32_t attr,
                       void* value) {
  namespace pi = rc::pool_info;
  switch (attr) {
    case pi::segment: return put(value, static_cast<std::uint32_t>(p.segment));
    case pi::global_flags: return put(value, p.global_flags);
    case pi::size: return put(value, std::size_t{p.size_bytes});
    case pi::alloc_allowed: return put(value, p.alloc_allowed);
    case pi::alloc_granule: return put(value, std::size_t{p.alloc_granule});
    case pi::alloc_alignment: return put(value, std::size_t{p.alloc_alignment});
    case pi::accessible_by_all: return put(value, p.accessible_by_all);
    case pi::alloc_max_size: return put(value, p.alloc_max_size);
  }
  if (is_5_2_3(s)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attr) {
    case pi::location:
      return p.location ? put(value, static_cast<std::uint32_t>(*p.location))
                        : HSA_STATUS_ERROR_INVALID_ARGUMENT;
    case pi::alloc_rec_granule: return put(value, p.alloc_rec_granule);
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

// Runs `callback` over `handles` outside the lock: callbacks call back into the double.
template <class Handle>
hsa_status_t iterate(const std::vector<std::uint64_t>& handles,
                     hsa_status_t (*callback)(Handle, void*), void* data) {
  for (std::uint64_t h : handles)
    if (hsa_status_t st = callback(Handle{h}, data); st != HSA_STATUS_SUCCESS) return st;
  return HSA_STATUS_SUCCESS;
}

}  // namespace

UMEM_DOUBLE_EXPORT hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return system_info(s, static_cast<std::uint32_t>(attribute), value);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*),
                                                   void* data) {
  std::vector<std::uint64_t> handles;
  {
    state& s = the_state();
    std::lock_guard<std::mutex> guard(s.mu);
    if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    for (std::size_t i = 0; i < s.machine.agents.size(); ++i) handles.push_back(agent_handle(i));
  }
  return iterate(handles, callback, data);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute,
                                                   void* value) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto index = decode_agent(s, agent.handle);
  if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return agent_info(s, *index, static_cast<std::uint32_t>(attribute), value);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_agent_iterate_isas(hsa_agent_t agent,
                                                       hsa_status_t (*callback)(hsa_isa_t, void*),
                                                       void* data) {
  std::vector<std::uint64_t> handles;
  {
    state& s = the_state();
    std::lock_guard<std::mutex> guard(s.mu);
    if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    const auto index = decode_agent(s, agent.handle);
    if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    for (std::size_t i = 0; i < s.machine.agents[*index].isas.size(); ++i)
      handles.push_back(isa_handle(*index, i));
  }
  return iterate(handles, callback, data);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute,
                                                     void* value) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto d = decode_isa(s, isa.handle);
  if (!d) return HSA_STATUS_ERROR_INVALID_ISA;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const std::string& name = s.machine.agents[d->first].isas[d->second];
  switch (static_cast<std::uint32_t>(attribute)) {
    case rc::isa_info::name_length:  // counts the terminator, as ROCr does
      return put(value, static_cast<std::uint32_t>(name.size() + 1));
    case rc::isa_info::name:
      std::memcpy(value, name.c_str(), name.size() + 1);
      return HSA_STATUS_SUCCESS;
  }
  return HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent, hsa_status_t (*callback)(hsa_amd_memory_pool_t, void*), void* data) {
  std::vector<std::uint64_t> handles;
  {
    state& s = the_state();
    std::lock_guard<std::mutex> guard(s.mu);
    if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
    const auto index = decode_agent(s, agent.handle);
    if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    for (std::size_t i = 0; i < s.machine.agents[*index].pools.size(); ++i)
      handles.push_back(pool_handle(*index, i));
  }
  return iterate(handles, callback, data);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                                             hsa_amd_memory_pool_info_t attribute,
                                                             void* value) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto d = decode_pool(s, memory_pool.handle);
  if (!d) return static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return pool_info(s, s.machine.agents[d->first].pools[d->second],
                   static_cast<std::uint32_t>(attribute), value);
}

// Only ACCESS is served, with ROCr's defaults: the owner is allowed; a system pool is allowed to
// CPU agents and disallowed-by-default to GPU agents; GPU memory is disallowed-by-default to
// every other agent (so allow_access is needed).
UMEM_DOUBLE_EXPORT hsa_status_t
hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
                                   hsa_amd_agent_memory_pool_info_t attribute, void* value) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const auto index = decode_agent(s, agent.handle);
  if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
  const auto d = decode_pool(s, memory_pool.handle);
  if (!d) return static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  if (value == nullptr || static_cast<std::uint32_t>(attribute) != rc::agent_pool_info::access)
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto& pool = s.machine.agents[d->first].pools[d->second];
  std::uint32_t access = rc::pool_access::disallowed_by_default;
  if (*index == d->first ||
      (pool.accessible_by_all && s.machine.agents[*index].kind == umem::agent_kind::cpu))
    access = rc::pool_access::allowed_by_default;
  return put(value, access);
}
