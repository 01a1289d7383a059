// Fills and copies: hipMemset, hipMemsetAsync, hipMemcpy, hipMemcpyAsync. They validate exactly as
// clr does (ROCm/clr f9f995c6 hipamd/src/hip_memory.cpp; the same in the 2026 tree) and then
// really write the bytes, at once (the asynchronous ones too: the double's GPU is the CPU).
#include <cstdint>
#include <cstring>

#include "double_objects.hpp"

namespace umem::hip_double {
namespace {

// A kind past hipMemcpyDefault, but DeviceToDeviceNoCU (clr ihipMemcpy_validate and
// hipMemcpyAsync_common): hipErrorInvalidMemcpyDirection.
bool bad_direction(int kind) {
  return static_cast<std::uint32_t>(kind) > static_cast<std::uint32_t>(memcpy_kind::default_kind) &&
         kind != memcpy_kind::device_to_device_no_cu;
}

// clr ihipMemset -> ihipMemset_validate: size 0 does nothing; a null destination, one HIP does not
// know ("dst ptr is host ptr hence error") and a size past the object's end are invalid. A
// synchronous fill waits for its stream unless it is a fill of device memory from its start.
hip_error fill(state& s, const char* call, void* dst, int value, std::size_t size, void* stream,
               bool async) {
  if (size == 0) return succeeded(s, call);
  if (dst == nullptr) return result::invalid_value;
  const resolved r = get_memory_object(s, dst);
  if (!r.known()) return result::invalid_value;
  if (size > r.room()) return result::invalid_value;
  std::memset(dst, value, size);
  const bool device_memory = r.arena || !is_host_type(*r.object);
  if (!async && !(r.offset == 0 && device_memory)) finish_stream(s, stream);
  return succeeded(s, call);
}

// clr ihipMemcpy -> ihipMemcpy_validate and IsHtoHMemcpyValid: size 0 does nothing; null
// pointers are invalid; a kind past hipMemcpyDefault (but DeviceToDeviceNoCU) is
// hipErrorInvalidMemcpyDirection; each side HIP knows must hold `size` bytes from the pointer;
// two sides HIP does not know are invalid unless hmmCpuMemoryAccessible_ (device 0's) or the kind
// is HostToHost or Default. Then src == dst with Default copies nothing, and two unknown sides are
// copied on the CPU after stream.finish() (ihipHtoHMemcpy). The kind is never checked against
// what the memory is.
hip_error copy(state& s, const char* call, void* dst, const void* src, std::size_t size, int kind,
               void* stream, bool async) {
  namespace mk = memcpy_kind;
  if (size == 0) return succeeded(s, call);
  if (dst == nullptr || src == nullptr) return result::invalid_value;
  if (bad_direction(kind)) return result::invalid_memcpy_direction;
  const resolved from = get_memory_object(s, src);
  const resolved to = get_memory_object(s, dst);
  if (from.known() && size > from.room()) return result::invalid_value;
  if (to.known() && size > to.room()) return result::invalid_value;
  const bool both_unknown = !from.known() && !to.known();
  if (both_unknown && !s.rocr.hmm_cpu_memory_accessible && kind != mk::host_to_host &&
      kind != mk::default_kind)
    return result::invalid_value;
  if (src == dst && kind == mk::default_kind) return succeeded(s, call);
  if (both_unknown) {
    finish_stream(s, stream);
    std::memmove(dst, src, size);
    ++s.cpu_copies;
    return succeeded(s, call);
  }
  std::memmove(dst, src, size);
  if (!async) finish_stream(s, stream);  // the command's queue is finished
  return succeeded(s, call);
}

}  // namespace
}  // namespace umem::hip_double

using namespace umem::hip_double;

UMEM_DOUBLE_EXPORT hip_error hipMemset(void* dst, int value, size_t size) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMemset", r)) return r;
  return fill(s, "hipMemset", dst, value, size, nullptr, false);
}

UMEM_DOUBLE_EXPORT hip_error hipMemsetAsync(void* dst, int value, size_t size, hip_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMemsetAsync", r)) return r;
  return fill(s, "hipMemsetAsync", dst, value, size, stream, true);
}

UMEM_DOUBLE_EXPORT hip_error hipMemcpy(void* dst, const void* src, size_t size, int kind) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMemcpy", r)) return r;
  return copy(s, "hipMemcpy", dst, src, size, kind, nullptr, false);
}

// clr hipMemcpyAsync_common checks the kind before anything else, even for size 0.
UMEM_DOUBLE_EXPORT hip_error hipMemcpyAsync(void* dst, const void* src, size_t size, int kind,
                                            hip_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; enter_memory(s, "hipMemcpyAsync", r)) return r;
  if (bad_direction(kind)) return result::invalid_memcpy_direction;
  return copy(s, "hipMemcpyAsync", dst, src, size, kind, stream, true);
}
