// Making and releasing memory HIP knows: hipMalloc, hipHostMalloc, hipHostAlloc, hipMallocManaged,
// hipFree, hipHostFree, hipHostRegister, hipHostUnregister. Each follows clr (ROCm/clr f9f995c6
// hipamd/src/hip_memory.cpp and hip_hmm.cpp; differences in the 2026 tree, ROCm/rocm-systems
// projects/clr, are named where they matter) over the attached ROCr.

#include "double_objects.hpp"

namespace umem::hip_double {
namespace {

const rocr_device* current(const state& s) {
  const int d = current_device();
  if (d < 0 || static_cast<std::size_t>(d) >= s.rocr.devices.size()) return nullptr;
  return &s.rocr.devices[static_cast<std::size_t>(d)];
}

// clr roc::Device::hostAlloc: a block of `pool` every GPU agent may use (allow_access for all of
// gpu_agents_); null when either call fails.
void* alloc_host_block(const state& s, hsa_amd_memory_pool_t pool, std::size_t size) {
  void* p = nullptr;
  if (s.rocr.fn.memory_pool_allocate(pool, size, 0, &p) != HSA_STATUS_SUCCESS) return nullptr;
  if (s.rocr.fn.agents_allow_access(static_cast<std::uint32_t>(s.rocr.gpu_agents.size()),
                                    s.rocr.gpu_agents.data(), nullptr, p) != HSA_STATUS_SUCCESS) {
    s.rocr.fn.memory_pool_free(p);
    return nullptr;
  }
  return p;
}

// The pool a host allocation comes from (clr roc::Device::hostAlloc): SystemSegment() with
// atomics, else SystemCoarseSegment() when there is one.
hsa_amd_memory_pool_t host_pool(const rocr_device& d, bool atomics) {
  return atomics || d.system_coarse.handle == 0 ? d.system_fine : d.system_coarse;
}

// Records a pool-backed object under its base (SvmBuffer::malloc -> AddMemObj).
void record(state& s, object_kind kind, void* p, std::size_t size, unsigned flags) {
  auto o = std::make_shared<mem_object>();
  o->kind = kind;
  o->base = reinterpret_cast<std::uintptr_t>(p);
  o->size = size;
  o->device = current_device();
  o->flags = flags;
  add_key(s, p, o);
}

// The release of an amd::Memory: a hipHostRegister buffer unlocks the range once per device it
// locked it for (roc::Buffer::destroy: hsa_amd_memory_unlock of the host memory, the GPU agents
// being BASE_PROFILE); an SVM allocation gives its block back to ROCr.
void release(const state& s, const mem_object& o) {
  if (o.kind == object_kind::registered) {
    for (std::size_t d = 0; d < o.device_addresses.size(); ++d)
      s.rocr.fn.memory_unlock(reinterpret_cast<void*>(o.base));
  } else {
    s.rocr.fn.memory_pool_free(reinterpret_cast<void*>(o.base));
  }
}

// clr ihipHostMalloc (hipHostMalloc, hipHostAlloc): coherent and non-coherent together are
// invalid (2026: so is uncached with either); atomics unless non-coherent; then ihipMalloc with
// CL_MEM_SVM_FINE_GRAIN_BUFFER from the current device's system pool.
hip_error host_malloc(state& s, const char* call, void** ptr, std::size_t size, unsigned flags) {
  namespace ha = host_alloc;
  if (ptr == nullptr) return result::invalid_value;
  if (size == 0) {
    *ptr = nullptr;
    return succeeded(s, call);
  }
  *ptr = nullptr;
  if ((flags & (ha::coherent | ha::non_coherent)) == (ha::coherent | ha::non_coherent))
    return result::invalid_value;
  if ((flags & ha::uncached) != 0 && (flags & (ha::coherent | ha::non_coherent)) != 0)
    return result::invalid_value;
  bool atomics =
      flags == 0 || (flags & (ha::coherent | ha::mapped | ha::numa_user | ha::uncached)) != 0;
  if ((flags & ha::non_coherent) != 0) atomics = false;
  const rocr_device* d = current(s);
  if (d == nullptr) return result::invalid_device;
  void* p = alloc_host_block(s, host_pool(*d, atomics), size);
  if (p == nullptr) return result::out_of_memory;  // "Allocation failed : Pinned Memory"
  record(s, object_kind::svm_host, p, size, flags);
  *ptr = p;
  return succeeded(s, call);
}

// clr ihipFree: null is fine; an unknown pointer is invalid; the arena's "free" finds no object in
// the map and frees nothing (SvmBuffer::free -> Device::svmFree); an SVM allocation is freed whole
// from any pointer into it (svmFree removes the key getSvmPtr()). A hipHostRegister buffer has no
// SVM pointer: svmFree's RemoveMemObj(nullptr) fails its guarantee at f9f995c6 (the 2026 tree
// releases it when the pointer is its key, and aborts the same way otherwise).
hip_error free_memory(state& s, const char* call, void* ptr) {
  if (ptr == nullptr) return succeeded(s, call);
  const resolved r = get_memory_object(s, ptr);
  if (!r.known()) return result::invalid_value;
  if (r.arena) {
    sync_device(s, 0);  // the arena's deviceId
    return succeeded(s, call);
  }
  const object_ref o = r.object;
  sync_device(s, o->device);  // g_devices[deviceId]->SyncAllStreams()
  remove_key(s, svm_pointer(*o), call, ptr);
  release(s, *o);
  return succeeded(s, call);
}

}  // namespace
}  // namespace umem::hip_double

using namespace umem::hip_double;

// clr ihipMalloc: a null out-pointer is invalid; size 0 gives null; else an SVM buffer of the
// current device from its gpuvm_segment_ (roc::Device::deviceLocalAlloc); hipErrorOutOfMemory when
// ROCr has no room.
UMEM_DOUBLE_EXPORT hip_error hipMalloc(void** ptr, size_t size) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMalloc", r)) return r;
  if (ptr == nullptr) return result::invalid_value;
  if (size == 0) {
    *ptr = nullptr;
    return succeeded(s, "hipMalloc");
  }
  const rocr_device* d = current(s);
  if (d == nullptr) return result::invalid_device;
  void* p = nullptr;
  if (s.rocr.fn.memory_pool_allocate(d->gpuvm, size, 0, &p) != HSA_STATUS_SUCCESS)
    return result::out_of_memory;
  record(s, object_kind::svm_device, p, size, 0);
  *ptr = p;
  return succeeded(s, "hipMalloc");
}

// clr hipHostMalloc: no flag range check of its own (ihipHostMalloc's rules only).
UMEM_DOUBLE_EXPORT hip_error hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostMalloc", r)) return r;
  return host_malloc(s, "hipHostMalloc", ptr, size, flags);
}

// clr hipHostAlloc: flags above Portable|Mapped|WriteCombined are invalid (f9f995c6 "flags >
// 7"; the 2026 tree also takes hipHostAllocUncached).
UMEM_DOUBLE_EXPORT hip_error hipHostAlloc(void** ptr, size_t size, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostAlloc", r)) return r;
  if (ptr == nullptr) return result::invalid_value;
  if (flags > (host_alloc::portable | host_alloc::mapped | host_alloc::write_combined))
    return result::invalid_value;
  return host_malloc(s, "hipHostAlloc", ptr, size, flags);
}

// clr hipMallocManaged (hip_hmm.cpp): a null out-pointer, size 0, or flags other than exactly
// hipMemAttachGlobal or hipMemAttachHost are invalid. ihipMallocManaged makes an SVM buffer of the
// host context (CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_ALLOC_HOST_PTR) on its first device; without
// HMM roc::Buffer::create takes it from hostAlloc(kNoAtomics), which the double always does (with
// HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED clr reserves plain memory and sets SVM attributes instead; HIP
// knows it either way). The allocation flags are not recorded (attributes say 0).
UMEM_DOUBLE_EXPORT hip_error hipMallocManaged(void** ptr, size_t size, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMallocManaged", r)) return r;
  if (ptr == nullptr || size == 0 || (flags != attach_flag::global && flags != attach_flag::host))
    return result::invalid_value;
  void* p = alloc_host_block(s, host_pool(s.rocr.devices[0], false), size);
  if (p == nullptr) return result::out_of_memory;  // hipErrorMemoryAllocation
  record(s, object_kind::svm_managed, p, size, 0);
  *ptr = p;
  return succeeded(s, "hipMallocManaged");
}

UMEM_DOUBLE_EXPORT hip_error hipFree(void* ptr) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipFree", r)) return r;
  return free_memory(s, "hipFree", ptr);
}

// clr hipHostFree: an object without an SVM pointer (a hipHostRegister buffer) is invalid; else
// ihipFree, whatever made the memory.
UMEM_DOUBLE_EXPORT hip_error hipHostFree(void* ptr) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostFree", r)) return r;
  if (const resolved r = get_memory_object(s, ptr); r.object && svm_pointer(*r.object) == nullptr)
    return result::invalid_value;
  return free_memory(s, "hipHostFree", ptr);
}

// clr ihipHostRegister. Flags outside Portable|Mapped|IoMemory|ExtCoarseGrained|ExtUncached are
// invalid (the 2026 tree; f9f995c6 checks "flags > 15", which also refuses ExtUncached), as are a
// null pointer and size 0. The buffer (CL_MEM_USE_HOST_PTR | CL_MEM_SVM_ATOMICS over the host
// context, created with forceAlloc: device memory for every device, platform/memory.cpp
// Memory::create) locks the range once per device, in device order, with that device's agent
// alone to its SystemSegment() (rocmemory.cpp roc::Buffer::create: hsa_amd_memory_lock_to_pool
// with one agent). A failed lock fails the create; the release of the buffer unlocks what was
// locked; clr answers hipErrorInvalidValue. Then AddMemObj(hostPtr) (plus each device's address
// when it differs and is not known yet): a base already in the map keeps its first object, and
// the new one, with its locks, is never released (clr does not answer
// hipErrorHostMemoryAlreadyRegistered; only the HCC-based HIP did). The double does not model
// IoMemory or ExtUncached's other pools (2026): it locks to SystemSegment() for every flag.
UMEM_DOUBLE_EXPORT hip_error hipHostRegister(void* host_ptr, size_t size, unsigned int flags) {
  namespace hr = host_register;
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostRegister", r)) return r;
  constexpr unsigned allowed =
      hr::portable | hr::mapped | hr::io_memory | hr::coarse_grained | hr::uncached;
  if (host_ptr == nullptr || size == 0 || (flags & ~allowed) != 0) return result::invalid_value;
  auto o = std::make_shared<mem_object>();
  o->kind = object_kind::registered;
  o->base = reinterpret_cast<std::uintptr_t>(host_ptr);
  o->size = size;
  for (const rocr_device& d : s.rocr.devices) {
    hsa_agent_t agent = d.agent;
    void* device_address = nullptr;
    if (s.rocr.fn.memory_lock_to_pool(host_ptr, size, &agent, 1, d.system_fine, 0,
                                      &device_address) != HSA_STATUS_SUCCESS) {
      release(s, *o);  // the locks of the devices before this one
      return result::invalid_value;
    }
    o->device_addresses.push_back(device_address);
  }
  o->device = current_device();
  o->flags = flags;
  if (!add_key(s, host_ptr, o)) {
    s.leaked.push_back(o);  // MemObjMap keeps the first; this one is never reached again
    ++s.leaked_registrations;
  }
  for (void* alias : o->device_addresses)
    if (alias != host_ptr && !find_object(s, alias).known()) add_key(s, alias, o);
  return succeeded(s, "hipHostRegister");
}

// clr ihipHostUnregister: null is invalid; a pointer getMemoryObject does not resolve answers
// hipErrorHostMemoryNotRegistered. One it resolves (an interior pointer, a hipMalloc block, the
// arena too) is taken for a registration: after SyncAllStreams, RemoveMemObj(hostPtr) aborts the
// process unless hostPtr is a key; a key's object is removed with its device aliases and released
// (a hipHostRegister buffer unlocks once per device; an SVM allocation is freed).
UMEM_DOUBLE_EXPORT hip_error hipHostUnregister(void* host_ptr) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostUnregister", r)) return r;
  if (host_ptr == nullptr) return result::invalid_value;
  const resolved r = get_memory_object(s, host_ptr);
  if (!r.known()) return result::host_memory_not_registered;  // "Cannot unregister host_ptr"
  sync_device(s, r.arena ? 0 : r.object->device);
  remove_key(s, host_ptr, "hipHostUnregister", host_ptr);  // the arena is never a key
  const object_ref o = r.object;
  for (void* alias : o->device_addresses)
    if (alias != host_ptr && find_object(s, alias).known())
      remove_key(s, alias, "hipHostUnregister", host_ptr);
  release(s, *o);
  return succeeded(s, "hipHostUnregister");
}
