// Pointer queries: hipPointerGetAttributes, hipHostGetDevicePointer, hipMemGetAddressRange, as clr
// answers them (ROCm/clr f9f995c6 hipamd/src/hip_memory.cpp; 2026 differences named).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "double_objects.hpp"

using namespace umem::hip_double;

// clr hipPointerGetAttributes: a null struct or pointer is invalid (the 2026 tree answers a null
// pointer as unregistered). A pointer HIP does not know is no error: type Unregistered, no device
// or host pointer, device hipInvalidDeviceId. One it knows: type Host for host memory
// (hipHostMalloc, hipHostRegister) with its host pointer, else Device; Managed for managed memory;
// the device pointer is the address on the allocating device; device and allocationFlags are the
// object's. The arena is device memory of device 0 at the pointer itself.
UMEM_DOUBLE_EXPORT hip_error hipPointerGetAttributes(pointer_attributes* attributes,
                                                     const void* ptr) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipPointerGetAttributes", r)) return r;
  if (attributes == nullptr || ptr == nullptr) return result::invalid_value;
  const resolved r = get_memory_object(s, ptr);
  std::memset(attributes, 0, sizeof *attributes);
  if (!r.known()) {
    attributes->type = memory_type::unregistered;
    attributes->device = invalid_device_id;
  } else if (r.arena) {
    attributes->type = memory_type::device;
    attributes->device_pointer = reinterpret_cast<void*>(kArenaBase + r.offset);
  } else {
    const mem_object& o = *r.object;
    auto at = [&r](void* base) { return static_cast<char*>(base) + r.offset; };
    attributes->type = is_host_type(o) ? memory_type::host : memory_type::device;
    if (is_host_type(o)) attributes->host_pointer = at(reinterpret_cast<void*>(o.base));
    attributes->device_pointer = at(device_address(o, o.device));
    attributes->is_managed = o.kind == object_kind::svm_managed ? 1 : 0;
    attributes->allocation_flags = o.flags;
    attributes->device = o.device;
    if (o.kind == object_kind::svm_managed) attributes->type = memory_type::managed;
  }
  return succeeded(s, "hipPointerGetAttributes");
}

// clr hipHostGetDevicePointer: a null out-pointer or flags other than 0 are invalid, and so is a
// pointer HIP does not know; else the address of its object on the current device.
UMEM_DOUBLE_EXPORT hip_error hipHostGetDevicePointer(void** device_pointer, void* host_pointer,
                                                     unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipHostGetDevicePointer", r)) return r;
  if (device_pointer == nullptr || flags != 0) return result::invalid_value;
  const resolved r = get_memory_object(s, host_pointer);
  if (!r.known()) return result::invalid_value;
  void* base = r.arena ? reinterpret_cast<void*>(kArenaBase)
                       : device_address(*r.object, current_device());
  *device_pointer = static_cast<char*>(base) + r.offset;
  return succeeded(s, "hipHostGetDevicePointer");
}

// clr hipMemGetAddressRange: a pointer HIP does not know is hipErrorNotFound; else the object's
// SVM pointer and size, which are clr's answer even where they surprise: a hipHostRegister range
// has no SVM pointer (base null), the arena answers 0x100 and SIZE_MAX. f9f995c6 writes through
// both out-pointers unchecked (the 2026 tree skips null ones): a null one crashes ROCm 6, so the
// double aborts naming it.
UMEM_DOUBLE_EXPORT hip_error hipMemGetAddressRange(void** base, size_t* size, void* device_ptr) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMemGetAddressRange", r)) return r;
  const resolved r = get_memory_object(s, device_ptr);
  if (!r.known()) return result::not_found;
  if (base == nullptr || size == nullptr) {
    std::fprintf(stderr,
                 "hip double: hipMemGetAddressRange(%p, %p, %p): clr f9f995c6 writes *pbase and "
                 "*psize without checking them; a null one crashes the process there.\n",
                 static_cast<void*>(base), static_cast<void*>(size), device_ptr);
    std::fflush(stderr);
    std::abort();
  }
  *base = r.arena ? reinterpret_cast<void*>(kArenaBase) : svm_pointer(*r.object);
  *size = r.arena ? kArenaSize : r.object->size;
  return succeeded(s, "hipMemGetAddressRange");
}
