// Devices and error strings: hipGetDeviceCount, hipGetDevice, hipSetDevice, hipGetErrorName,
// hipGetErrorString. The device count is umem_hip_double_reset's, or the attached ROCr's GPU
// agents (double_rocr.cpp).
#include <iterator>

#include "double_state.hpp"

namespace umem::hip_double {
namespace {

// A query `call` writing value(state) to `out`.
template <class Value>
hip_error answer(const char* call, int* out, Value value) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, call, false);
  if (out == nullptr) return result::invalid_value;
  if (hip_error r; injected(s, call, r)) return r;
  *out = value(s);
  return succeeded(s, call);
}

struct error_entry {
  hip_error code;
  const char* name;
  const char* text;
};
// The names and texts of clr hipamd/src/hip_error.cpp (ihipGetErrorName, hipGetErrorString).
constexpr error_entry kErrors[] = {
    {result::success, "hipSuccess", "no error"},
    {result::invalid_value, "hipErrorInvalidValue", "invalid argument"},
    {result::out_of_memory, "hipErrorOutOfMemory", "out of memory"},
    {result::invalid_memcpy_direction, "hipErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {result::no_device, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {result::invalid_device, "hipErrorInvalidDevice", "invalid device ordinal"},
    {result::invalid_handle, "hipErrorInvalidHandle", "invalid resource handle"},
    {result::not_found, "hipErrorNotFound", "named symbol not found"},
    {result::not_ready, "hipErrorNotReady", "device not ready"},
    {result::host_memory_already_registered, "hipErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {result::host_memory_not_registered, "hipErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {result::launch_failure, "hipErrorLaunchFailure", "unspecified launch failure"},
    {result::unknown, "hipErrorUnknown", "unknown error"},
};

// HIP answers hipErrorUnknown's strings for a code it does not know.
const error_entry& error_of(hip_error r) {
  for (const auto& e : kErrors)
    if (e.code == r) return e;
  return kErrors[std::size(kErrors) - 1];
}

}  // namespace
}  // namespace umem::hip_double

using namespace umem::hip_double;

UMEM_DOUBLE_EXPORT const char* hipGetErrorName(hip_error r) { return error_of(r).name; }
UMEM_DOUBLE_EXPORT const char* hipGetErrorString(hip_error r) { return error_of(r).text; }

UMEM_DOUBLE_EXPORT hip_error hipGetDeviceCount(int* count) {
  return answer("hipGetDeviceCount", count, [](const state& s) { return s.device_count; });
}

UMEM_DOUBLE_EXPORT hip_error hipGetDevice(int* device) {
  return answer("hipGetDevice", device, [](const state&) { return current_device(); });
}

UMEM_DOUBLE_EXPORT hip_error hipSetDevice(int device) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipSetDevice", false);
  if (hip_error r; injected(s, "hipSetDevice", r)) return r;
  if (device < 0 || device >= s.device_count) return result::invalid_device;
  current_device() = device;
  return succeeded(s, "hipSetDevice");
}
