// HIP's registry of memory objects (clr amd::MemObjMap) and how every HIP memory call resolves a
// pointer against it (hip::getMemoryObject).
//
// Note [Which pointers HIP knows]
// Every clr memory entry point resolves its pointers with hip::getMemoryObject (clr
// hipamd/src/hip_memory.cpp): first amd::MemObjMap::FindMemObj, then the current device's
// GetArenaMemObj.
// - FindMemObj (rocclr/device/device.cpp) looks at the greatest key at or below the pointer only,
//   and finds its object when the pointer lies within that object's size. Keys are the bases of
//   hipMalloc/hipHostMalloc/hipMallocManaged allocations (SvmBuffer::malloc) and of
//   hipHostRegister ranges (plus each device's alias, when a lock gives a device address other
//   than the host one; ROCr on an APU gives the host address). AddMemObj keeps the first object
//   of a key and only logs a second; RemoveMemObj aborts the process (guarantee) when the pointer
//   is not a key.
// - GetArenaMemObj (rocclr/device/rocm/rocdevice.cpp, IsValidAllocation) asks ROCr's
//   hsa_amd_pointer_info: LOCKED ("Return false for pinned memory"), UNKNOWN and, in 2025-2026
//   clr, RESERVED_ADDR get no object; every other type (a hsa_amd_memory_pool_allocate block, IPC,
//   graphics) gets the process-wide arena object (amd::ArenaMemory: base 0x100, size SIZE_MAX, so
//   no size check ever fails and offsets are pointer - 0x100; memory flags 0, device 0).
// Unknown, for the double, is therefore: no object by FindMemObj and a ROCr type of LOCKED,
// UNKNOWN or RESERVED_ADDR. Memory locked with hsa_amd_memory_lock_to_pool by anyone but HIP, and
// plain malloc/mmap memory, are unknown; hipHostRegister'd memory is an object; ROCr pool memory
// is the arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "double_state.hpp"

namespace umem::hip_double {

// amd::ArenaMemory: Buffer(context, 0, SIZE_MAX, kArenaMemoryPtr = 0x100) (clr
// rocclr/platform/memory.hpp); its device memory's address is that SVM pointer.
inline constexpr std::uintptr_t kArenaBase = 0x100;
inline constexpr std::size_t kArenaSize = std::numeric_limits<std::size_t>::max();

// What hip::getMemoryObject answers for a pointer.
struct resolved {
  object_ref object;     // an object of the map
  bool arena = false;    // else the arena
  std::size_t offset = 0;
  bool known() const { return object != nullptr || arena; }
  // Bytes from the pointer to the end of the object (getSize() - offset; the arena has no end).
  std::size_t room() const { return object != nullptr ? object->size - offset : kArenaSize - offset; }
};

// amd::MemObjMap::FindMemObj.
resolved find_object(const state& s, const void* p);
// hip::getMemoryObject: FindMemObj, then the arena (needs an attached ROCr).
resolved get_memory_object(const state& s, const void* p);
// amd::MemObjMap::AddMemObj: false (and nothing changes) when `key` is a key already.
bool add_key(state& s, const void* key, const object_ref& o);
// amd::MemObjMap::RemoveMemObj, with its guarantee: when `key` is not a key, prints what failed,
// naming the entry point `caller` and its argument `arg`, and aborts the process, as clr does.
void remove_key(state& s, const void* key, const char* caller, const void* arg);

// The memory flags of the object's clr allocation decide its type (hipPointerGetAttributes,
// ihipMemcpy): CL_MEM_SVM_FINE_GRAIN_BUFFER or CL_MEM_USE_HOST_PTR is host memory.
inline bool is_host_type(const mem_object& o) { return o.kind != object_kind::svm_device; }
// getSvmPtr(): the SVM allocations have one, a hipHostRegister buffer has none.
inline void* svm_pointer(const mem_object& o) {
  return o.kind == object_kind::registered ? nullptr : reinterpret_cast<void*>(o.base);
}
// The address of the object's memory on `device` (device::Memory::virtualAddress()).
void* device_address(const mem_object& o, int device);

}  // namespace umem::hip_double
