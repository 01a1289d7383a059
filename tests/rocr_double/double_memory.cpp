// Memory entry points of the double: pool allocations (anonymous host mappings), access grants,
// host-memory locking, pointer info and SVM attributes. Every call lands in the call log.
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "double_state.hpp"
#include "support/host_pages.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

using namespace umem::rocr_double;
namespace rc = umem::hsa::rocr_compat;

namespace {

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

hsa_status_t finish(state& s, const std::string& call, hsa_status_t st,
                    const std::string& tail = {}) {
  log_call(s, call + " -> " + status_name(st) + tail);
  return st;
}

std::string node_of(const state& s, std::size_t agent) {
  return "node" + std::to_string(s.machine.agents[agent].kfd_node);
}

// Agent list as KFD nodes ("node4,node5"), or nullopt when a handle is invalid.
std::optional<std::vector<std::size_t>> decode_agents(const state& s, const hsa_agent_t* agents,
                                                      std::size_t n, std::string& text) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < n; ++i) {
    auto index = decode_agent(s, agents[i].handle);
    if (!index) {
      text += (text.empty() ? "" : ",") + std::string("invalid");
      return std::nullopt;
    }
    text += (text.empty() ? "" : ",") + node_of(s, *index);
    out.push_back(*index);
  }
  return out;
}

template <class Ranges>
bool overlaps(const Ranges& ranges, std::uintptr_t start, std::size_t size) {
  auto it = ranges.lower_bound(start + size);
  if (it == ranges.begin()) return false;
  --it;
  return it->first + it->second.size > start;
}

std::size_t pool_in_use(const state& s, std::size_t agent, std::size_t pool) {
  std::size_t sum = 0;
  for (const auto& [start, a] : s.allocations)
    if (a.agent == agent && a.pool == pool) sum += a.mapped;
  return sum;
}

// Note [Locking a range twice]
// libhsakmt keeps one object per registered user range: registering exactly the same (address,
// size) again increments its registration_count, and each deregistration decrements it; the BO
// goes only with the last (libhsakmt/src/fmm.c: fmm_register_user_memory and
// hsakmt_fmm_register_memory "++registration_count", __fmm_release "registration_count--").
// The agents a repeated lock names are added to the range's: on the SVM-API path
// fmm_map_mem_svm_api sets ACCESS_IN_PLACE for each node it maps and never takes one away. So a
// repeated lock of the same range succeeds, hsa_amd_memory_unlock releases one count, and
// pointer info says LOCKED until the last unlock (ROCr amd_memory_region.cpp MemoryRegion::Lock
// and Unlock are RegisterMemory/DeregisterMemory around those). The log shows "count=N", the
// locks the range holds after the call, whenever more than one is involved; a lone lock and its
// unlock read as before. (On the SVM-API path there is no object at all and a repeated lock is
// simply idempotent; either way HIP, which locks a range once per device, succeeds.)

// Adds `more` to `agents` (empty: all agents, which stays all).
void add_agents(std::vector<std::size_t>& agents, const std::vector<std::size_t>& more) {
  if (agents.empty()) return;
  if (more.empty()) {
    agents.clear();
    return;
  }
  for (std::size_t a : more)
    if (std::find(agents.begin(), agents.end(), a) == agents.end()) agents.push_back(a);
}

// Note [What a lock pins]
// A lock pins the range's pages for the GPU. libhsakmt registers a user range either as a KFD
// userptr BO (fmm_register_user_memory -> AMDKFD_IOC_ALLOC_MEMORY_OF_GPU with
// KFD_IOC_ALLOC_MEM_FLAGS_USERPTR), whose pages the kernel gets at once with write access
// (amdgpu_amdkfd_gpuvm.c init_user_pages -> amdgpu_ttm_tt_get_user_pages -> hmm_range_fault,
// which answers -EPERM for a mapping without VM_WRITE, -EFAULT where no mapping is), or through
// the SVM API (kfd_svm.c: svm_range_is_valid refuses a range not wholly covered by mappings). A
// failed registration makes MemoryRegion::Lock answer HSA_STATUS_ERROR (ROCR
// amd_memory_region.cpp: RegisterMemory failed). The double is as strict as the stricter path:
// every page of the range mapped and writable.
// Why [start, start + size) cannot be pinned, or empty.
std::string unpinnable(std::uintptr_t start, std::size_t size) {
  const umem::test::host_pages pages = umem::test::inspect_host_pages(start, size);
  if (!pages.mapped) return " (pages not mapped: KFD cannot pin a range with holes)";
  if (!pages.writable) return " (read-only pages: KFD pins user pages with write access)";
  return "";
}

hsa_status_t lock_common(state& s, const char* entry, std::string call, void* host_ptr,
                         std::size_t size,
                         hsa_agent_t* agents, int num_agent, void** agent_ptr,
                         std::optional<std::size_t> cpu_agent) {
  std::string names;
  std::optional<std::vector<std::size_t>> indices;
  if (num_agent >= 0 && (agents != nullptr || num_agent == 0))
    indices = decode_agents(s, agents, static_cast<std::size_t>(num_agent), names);
  call += " agents=" + (names.empty() ? std::string("all") : names);
  if (host_ptr == nullptr || size == 0 || agent_ptr == nullptr || num_agent < 0 ||
      (num_agent > 0 && agents == nullptr))
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (!indices) return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
  if (counted_failure(s, entry))
    return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES, " (injected)");
  if (const auto injected = std::exchange(s.fail_next_lock, std::nullopt))
    return finish(s, call, static_cast<hsa_status_t>(*injected), " (injected)");
  const auto start = reinterpret_cast<std::uintptr_t>(host_ptr);
  if (auto same = s.locks.find(start); same != s.locks.end() && same->second.size == size) {
    locked_range& l = same->second;  // Note [Locking a range twice]
    ++l.count;
    add_agents(l.agents, *indices);
    *agent_ptr = host_ptr;
    return finish(s, call, HSA_STATUS_SUCCESS, " " + l.id + " count=" + std::to_string(l.count));
  }
  // Stricter than ROCr: locking a range that overlaps a locked one without being exactly it, or
  // locking pool memory, is a caller bug worth flagging.
  if (overlaps(s.locks, start, size) || overlaps(s.allocations, start, size))
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT, " (overlaps locked or pool memory)");
  if (const std::string why = unpinnable(start, size); !why.empty())
    return finish(s, call, HSA_STATUS_ERROR, why);  // Note [What a lock pins]
  locked_range l{next_id(s, "l"), size, *indices, cpu_agent};
  const std::string id = l.id;
  s.locks.emplace(start, std::move(l));
  *agent_ptr = host_ptr;  // one address space on an APU
  return finish(s, call, HSA_STATUS_SUCCESS, " " + id);
}

const char* svm_attribute_name(std::uint64_t attr) {
  namespace sa = rc::svm_attrib;
  switch (attr) {
    case sa::global_flag: return "global_flag";
    case sa::read_only: return "read_only";
    case sa::hive_local: return "hive_local";
    case sa::migration_granularity: return "migration_granularity";
    case sa::preferred_location: return "preferred_location";
    case sa::prefetch_location: return "prefetch_location";
    case sa::read_mostly: return "read_mostly";
    case sa::gpu_exec: return "gpu_exec";
    case sa::agent_accessible: return "agent_accessible";
    case sa::agent_accessible_in_place: return "agent_accessible_in_place";
    case sa::agent_no_access: return "agent_no_access";
    case sa::access_query: return "access_query";
  }
  return nullptr;
}

bool is_agent_valued(std::uint64_t attr) {
  namespace sa = rc::svm_attrib;
  return attr == sa::preferred_location || attr == sa::prefetch_location ||
         attr == sa::agent_accessible || attr == sa::agent_accessible_in_place ||
         attr == sa::agent_no_access || attr == sa::access_query;
}

bool is_access(std::uint64_t attr) {
  namespace sa = rc::svm_attrib;
  return attr == sa::agent_accessible || attr == sa::agent_accessible_in_place ||
         attr == sa::agent_no_access;
}

}  // namespace

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool,
                                                             size_t size, uint32_t flags,
                                                             void** ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto d = decode_pool(s, memory_pool.handle);
  const std::string call = "pool_allocate " +
                           (d ? node_of(s, d->first) + " pool=" + std::to_string(d->second)
                              : std::string("pool=invalid")) +
                           " size=" + std::to_string(size) + " flags=" + std::to_string(flags);
  if (!d) return finish(s, call, static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL));
  if (ptr == nullptr || size == 0) return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // 5.2.3 rejects any flag; 6.2 and later ignore bits they do not know.
  if (s.version == release::v5_2_3 && flags != 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (counted_failure(s, "hsa_amd_memory_pool_allocate"))
    return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES, " (injected)");
  if (const auto injected = std::exchange(s.fail_next_pool_allocate, std::nullopt))
    return finish(s, call, static_cast<hsa_status_t>(*injected), " (injected)");
  const auto& pool = s.machine.agents[d->first].pools[d->second];
  if (!pool.is_global() || !pool.alloc_allowed)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ALLOCATION);
  const std::size_t page = page_size();
  const std::size_t mapped = round_up(size, std::max<std::size_t>(pool.alloc_granule, page));
  // The pool's own size, and what the agent's memory has left (its pools share it).
  if (pool_in_use(s, d->first, d->second) + mapped > pool.size_bytes ||
      mapped > agent_memory_avail(s, d->first))
    return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  // Reserve-only mappings: a test may ask for pool-sized blocks without owning that much RAM.
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES, " (mmap failed)");
  if (reinterpret_cast<std::uintptr_t>(p) % std::max<std::size_t>(pool.alloc_alignment, 1) != 0) {
    munmap(p, mapped);
    return finish(s, call, HSA_STATUS_ERROR, " (double cannot align beyond a page)");
  }
  allocation a{next_id(s, "a"), size, mapped, d->first, d->second, {}};
  const std::string id = a.id;
  s.allocations.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(a));
  *ptr = p;
  return finish(s, call, HSA_STATUS_SUCCESS, " " + id);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_pool_free(void* ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "pool_free " + name_pointer(s, ptr);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == s.allocations.end()) return finish(s, call, HSA_STATUS_ERROR_INVALID_ALLOCATION);
  munmap(ptr, it->second.mapped);
  s.allocations.erase(it);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents,
                                                            const hsa_agent_t* agents,
                                                            const uint32_t* flags,
                                                            const void* ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  std::string names;
  std::optional<std::vector<std::size_t>> indices;
  if (agents != nullptr) indices = decode_agents(s, agents, num_agents, names);
  const std::string call = "allow_access " + name_pointer(s, ptr) + " agents=" + names +
                           " flags=" + (flags == nullptr ? "null" : "non-null");
  // ROCr requires flags == NULL in every release.
  if (num_agents == 0 || agents == nullptr || ptr == nullptr || flags != nullptr)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (!indices) return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == s.allocations.end())
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT,
                  " (not the start of a pool allocation)");
  it->second.allowed.insert(indices->begin(), indices->end());
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_lock(void* host_ptr, size_t size,
                                                    hsa_agent_t* agents, int num_agent,
                                                    void** agent_ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  return lock_common(s, "hsa_amd_memory_lock", "memory_lock size=" + std::to_string(size),
                     host_ptr, size, agents, num_agent, agent_ptr, std::nullopt);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_lock_to_pool(void* host_ptr, size_t size,
                                                            hsa_agent_t* agents, int num_agent,
                                                            hsa_amd_memory_pool_t pool,
                                                            uint32_t flags, void** agent_ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto d = decode_pool(s, pool.handle);
  const std::string call =
      "memory_lock_to_pool size=" + std::to_string(size) + " pool=" +
      (d ? node_of(s, d->first) + "/" + std::to_string(d->second) : std::string("invalid")) +
      " flags=" + std::to_string(flags);
  // The pool must be a CPU agent's global pool.
  if (!d || s.machine.agents[d->first].kind != umem::agent_kind::cpu ||
      !s.machine.agents[d->first].pools[d->second].is_global())
    return finish(s, call, static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL));
  if (flags != 0) return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  return lock_common(s, "hsa_amd_memory_lock_to_pool", call, host_ptr, size, agents, num_agent,
                     agent_ptr, d->first);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_unlock(void* host_ptr) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "memory_unlock " + name_pointer(s, host_ptr);
  auto it = s.locks.find(reinterpret_cast<std::uintptr_t>(host_ptr));
  if (it == s.locks.end()) return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (it->second.count > 1) {  // Note [Locking a range twice]: one count goes
    --it->second.count;
    return finish(s, call, HSA_STATUS_SUCCESS, " count=" + std::to_string(it->second.count));
  }
  s.locks.erase(it);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                                                     void* (*alloc)(size_t),
                                                     uint32_t* num_agents_accessible,
                                                     hsa_agent_t** accessible) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const bool wants_agents = num_agents_accessible != nullptr || accessible != nullptr;
  if (info == nullptr || info->size < sizeof(hsa_amd_pointer_info_t) ||
      (wants_agents &&
       (num_agents_accessible == nullptr || accessible == nullptr || alloc == nullptr)))
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_amd_pointer_info_t out{};
  out.size = sizeof out;
  out.type = HSA_EXT_POINTER_TYPE_UNKNOWN;
  std::vector<std::size_t> agents;
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  auto alloc_it = s.allocations.upper_bound(addr);
  auto lock_it = s.locks.upper_bound(addr);
  if (alloc_it != s.allocations.begin() &&
      addr < std::prev(alloc_it)->first + std::prev(alloc_it)->second.size) {
    const auto& [start, a] = *std::prev(alloc_it);
    out.type = HSA_EXT_POINTER_TYPE_HSA;
    out.agentBaseAddress = out.hostBaseAddress = reinterpret_cast<void*>(start);
    out.sizeInBytes = a.size;
    out.agentOwner.handle = agent_handle(a.agent);
    out.global_flags = s.machine.agents[a.agent].pools[a.pool].global_flags;
    agents.push_back(a.agent);
    for (std::size_t g : a.allowed)
      if (g != a.agent) agents.push_back(g);
  } else if (lock_it != s.locks.begin() &&
             addr < std::prev(lock_it)->first + std::prev(lock_it)->second.size) {
    const auto& [start, l] = *std::prev(lock_it);
    out.type = HSA_EXT_POINTER_TYPE_LOCKED;
    out.agentBaseAddress = out.hostBaseAddress = reinterpret_cast<void*>(start);
    out.sizeInBytes = l.size;
    if (l.cpu_agent) out.agentOwner.handle = agent_handle(*l.cpu_agent);
    agents = l.agents;
    if (agents.empty())
      for (std::size_t i = 0; i < s.machine.agents.size(); ++i) agents.push_back(i);
  }
  std::memcpy(info, &out, sizeof out);
  if (wants_agents) {
    *num_agents_accessible = static_cast<uint32_t>(agents.size());
    *accessible = static_cast<hsa_agent_t*>(
        alloc(sizeof(hsa_agent_t) * std::max<std::size_t>(agents.size(), 1)));
    if (*accessible == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    for (std::size_t i = 0; i < agents.size(); ++i)
      (*accessible)[i].handle = agent_handle(agents[i]);
  }
  return HSA_STATUS_SUCCESS;
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_svm_attributes_set(
    void* ptr, size_t size, hsa_amd_svm_attribute_pair_t* attribute_list, size_t attribute_count) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  std::string call = "svm_attributes_set " + name_pointer(s, ptr) + " size=" + std::to_string(size);
  if (ptr == nullptr || size == 0 || attribute_list == nullptr || attribute_count == 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // Validate everything before applying anything.
  std::vector<std::optional<std::size_t>> agent_of(attribute_count);
  hsa_status_t verdict = HSA_STATUS_SUCCESS;
  for (std::size_t i = 0; i < attribute_count; ++i) {
    const auto& [attr, value] = attribute_list[i];
    const char* name = svm_attribute_name(attr);
    call += std::string(" ") + (name != nullptr ? name : "unknown(" + std::to_string(attr) + ")");
    if (name == nullptr || attr == rc::svm_attrib::access_query ||
        (attr == rc::svm_attrib::gpu_exec && s.version == release::v5_2_3) ||
        (attr == rc::svm_attrib::global_flag && value > rc::svm_model::indeterminate)) {
      verdict = HSA_STATUS_ERROR_INVALID_ARGUMENT;
      continue;
    }
    if (is_agent_valued(attr)) {
      agent_of[i] = decode_agent(s, value);
      call += "=" + (agent_of[i] ? node_of(s, *agent_of[i]) : std::string("invalid"));
      if (!agent_of[i] && verdict == HSA_STATUS_SUCCESS) verdict = HSA_STATUS_ERROR_INVALID_AGENT;
    } else {
      call += "=" + std::to_string(value);
    }
  }
  if (verdict != HSA_STATUS_SUCCESS) return finish(s, call, verdict);
  const auto key = std::make_pair(reinterpret_cast<std::uintptr_t>(ptr), size);
  for (std::size_t i = 0; i < attribute_count; ++i) {
    const auto& [attr, value] = attribute_list[i];
    if (is_access(attr))
      s.svm_access[key][*agent_of[i]] = attr;
    else
      s.svm[key][attr] = value;
  }
  return finish(s, call, HSA_STATUS_SUCCESS);
}

// Answers what was set on exactly this range. The double does not model KFD's defaults: an
// attribute never set answers INVALID_ARGUMENT; ACCESS_QUERY of an agent never set answers
// AGENT_NO_ACCESS.
UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_svm_attributes_get(
    void* ptr, size_t size, hsa_amd_svm_attribute_pair_t* attribute_list, size_t attribute_count) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call =
      "svm_attributes_get " + name_pointer(s, ptr) + " size=" + std::to_string(size);
  if (ptr == nullptr || size == 0 || attribute_list == nullptr || attribute_count == 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const auto key = std::make_pair(reinterpret_cast<std::uintptr_t>(ptr), size);
  for (std::size_t i = 0; i < attribute_count; ++i) {
    auto& pair = attribute_list[i];
    if (pair.attribute == rc::svm_attrib::access_query) {
      const auto agent = decode_agent(s, pair.value);
      if (!agent) return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
      pair.attribute = rc::svm_attrib::agent_no_access;
      if (auto r = s.svm_access.find(key); r != s.svm_access.end())
        if (auto a = r->second.find(*agent); a != r->second.end()) pair.attribute = a->second;
      continue;
    }
    auto r = s.svm.find(key);
    if (r == s.svm.end() || !r->second.contains(pair.attribute))
      return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT,
                    " (attribute never set on this range)");
    pair.value = r->second.at(pair.attribute);
  }
  return finish(s, call, HSA_STATUS_SUCCESS);
}

// Test control: other processes hold `bytes` of the memory of the agent of KFD node `kfd_node`
// (0 clears it); it counts against allocations and MEMORY_AVAIL until the last hsa_shut_down.
UMEM_DOUBLE_EXPORT void umem_rocr_double_set_foreign_use(uint32_t kfd_node, uint64_t bytes) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (bytes == 0)
    s.foreign_use.erase(kfd_node);
  else
    s.foreign_use[kfd_node] = bytes;
}

// Test control: the next memory_lock or memory_lock_to_pool with valid arguments answers
// `status` and locks nothing (ROCr answers OUT_OF_RESOURCES when it cannot pin more memory).
UMEM_DOUBLE_EXPORT void umem_rocr_double_fail_next_lock(uint32_t status) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.fail_next_lock = status;
}

// Test control: the next hsa_amd_memory_pool_allocate with a valid pool answers `status` and
// allocates nothing.
UMEM_DOUBLE_EXPORT void umem_rocr_double_fail_next_pool_allocate(uint32_t status) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.fail_next_pool_allocate = status;
}
