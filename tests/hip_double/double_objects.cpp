// HIP's registry of memory objects (Note [Which pointers HIP knows] in double_objects.hpp) and the
// umem_hip_double_known control.
#include "double_objects.hpp"

#include <cstdio>
#include <cstdlib>

namespace umem::hip_double {
namespace {

// HSA_EXT_POINTER_TYPE_RESERVED_ADDR (ROCr 6.3 and later; newer than Debian's 5.2.3 headers).
constexpr std::uint32_t kPointerTypeReservedAddr = 5;

}  // namespace

resolved find_object(const state& s, const void* p) {
  const auto key = reinterpret_cast<std::uintptr_t>(p);
  auto it = s.objects.upper_bound(key);
  if (it == s.objects.begin()) return {};
  --it;
  // Only the nearest key at or below counts, with its own object's size.
  if (key - it->first >= it->second->size) return {};
  return resolved{it->second, false, key - it->first};
}

resolved get_memory_object(const state& s, const void* p) {
  if (resolved r = find_object(s, p); r.known()) return r;
  if (!s.rocr.attached()) return {};
  const std::uint32_t type = pointer_type(s.rocr, p);
  if (type == HSA_EXT_POINTER_TYPE_UNKNOWN || type == HSA_EXT_POINTER_TYPE_LOCKED ||
      type == kPointerTypeReservedAddr)
    return {};
  return resolved{nullptr, true, reinterpret_cast<std::uintptr_t>(p) - kArenaBase};
}

bool add_key(state& s, const void* key, const object_ref& o) {
  return s.objects.emplace(reinterpret_cast<std::uintptr_t>(key), o).second;
}

void remove_key(state& s, const void* key, const char* caller, const void* arg) {
  if (s.objects.erase(reinterpret_cast<std::uintptr_t>(key)) == 1) return;
  std::fprintf(stderr,
               "hip double: %s(%p): clr rocclr/device/device.cpp MemObjMap::RemoveMemObj fails "
               "guarantee(rval == 1) \"Memobj map does not have ptr: %p\": HIP found a memory "
               "object for the pointer (getMemoryObject) but %p is not a key of its map. clr "
               "aborts the process here, and so does the double.\n",
               caller, arg, key, key);
  std::fflush(stderr);
  std::abort();
}

void* device_address(const mem_object& o, int device) {
  if (o.kind == object_kind::registered && device >= 0 &&
      static_cast<std::size_t>(device) < o.device_addresses.size())
    return o.device_addresses[static_cast<std::size_t>(device)];
  return reinterpret_cast<void*>(o.base);
}

}  // namespace umem::hip_double

using namespace umem::hip_double;

// Test control: how HIP resolves `p` now (Note [Which pointers HIP knows]): 0 unknown, 1 an object
// of HIP's map, 2 the arena (ROCr memory HIP takes as device memory).
UMEM_DOUBLE_EXPORT int umem_hip_double_known(const void* p) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  const resolved r = get_memory_object(s, p);
  return r.object != nullptr ? 1 : (r.arena ? 2 : 0);
}
