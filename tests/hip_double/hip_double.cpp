// The HIP runtime test double: a libamdhip64 stand-in with GPUs whose streams run only when the
// test says so.
//
// Note [What the HIP double is]
// A shared library exporting the HIP entry points umem's table uses (hip_runtime.hpp). umem never
// loads HIP itself, so a test maps the double first (dlopen / ctypes.CDLL with RTLD_GLOBAL, as
// PyTorch for ROCm maps libamdhip64) and points UMEM_HIP_RUNTIME_LIB at it. It serves
// umem_hip_double_reset(n) devices (1 until a test says otherwise); the current device is
// per-thread, as in HIP. A stream made busy by umem_hip_double_pending(stream) keeps every event
// recorded on it from then on not ready (hipEventQuery answers hipErrorNotReady) until
// umem_hip_double_complete(stream) or umem_hip_double_complete_all(); hipEventSynchronize lets
// the GPU reach that one event (it completes). Events recorded on an idle stream complete at once.
// It is strict on purpose, to serve as a call checker: unknown events and flags, devices out of
// range, and a null-stream record from a device other than the event's are rejected as HIP does.
// umem_hip_double_fail_next(call, result) makes the next call of `call` answer `result`.
// Built twice: umem_hip_double_partial lacks hipEventSynchronize (UMEM_HIP_DOUBLE_WITH_SYNCHRONIZE).
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "umem/hip_runtime/hip_compat.hpp"
#include "umem/hip_runtime/hip_runtime.hpp"

#define UMEM_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace umem::hip;
namespace res = hip_compat::result;
namespace flag = hip_compat::event_flag;

struct event_state {
  int device = 0;
  unsigned flags = 0;
  bool pending = false;
  void* stream = nullptr;  // where it was last recorded
};

struct state {
  std::mutex mu;
  int device_count = 1;
  std::uintptr_t next_event = 1;
  std::map<std::uintptr_t, event_state> events;  // by handle value
  std::set<void*> busy;                           // streams whose queued work has not completed
  std::map<std::string, long> calls;              // successful calls, by entry point
  std::map<std::string, hip_error> fail_next;     // entry point -> the result of its next call
  event_state last_created{-1};                   // device -1: none yet
};

state& the_state() {
  static state s;
  return s;
}

thread_local int current_device = 0;

// Event handles: a tag above any pointer a test uses, plus a serial number; never dereferenced.
constexpr std::uintptr_t kEventTag = 0xE7E70000u;

event_state* find_event(state& s, hip_event e) {
  auto it = s.events.find(reinterpret_cast<std::uintptr_t>(e));
  return it == s.events.end() ? nullptr : &it->second;
}

// Whether a test asked `call` to fail now; `out` gets the result it asked for.
bool injected(state& s, const char* call, hip_error& out) {
  auto it = s.fail_next.find(call);
  if (it == s.fail_next.end()) return false;
  out = it->second;
  s.fail_next.erase(it);
  return true;
}

hip_error succeeded(state& s, const char* call) {
  ++s.calls[call];
  return res::success;
}

// A query `call` writing value(state) to `out`.
template <class Value>
hip_error answer(const char* call, int* out, Value value) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (out == nullptr) return res::invalid_value;
  if (hip_error r; injected(s, call, r)) return r;
  *out = value(s);
  return succeeded(s, call);
}

struct error_entry {
  hip_error code;
  const char* name;
  const char* text;
};
constexpr error_entry kErrors[] = {
    {res::success, "hipSuccess", "no error"},
    {res::invalid_value, "hipErrorInvalidValue", "invalid argument"},
    {res::invalid_device, "hipErrorInvalidDevice", "invalid device ordinal"},
    {res::invalid_handle, "hipErrorInvalidHandle", "invalid resource handle"},
    {res::not_ready, "hipErrorNotReady", "device not ready"},
    {res::launch_failure, "hipErrorLaunchFailure", "unspecified launch failure"},
    {res::unknown, "hipErrorUnknown", "unknown error"},
};

// HIP answers hipErrorUnknown's strings for a code it does not know.
const error_entry& error_of(hip_error r) {
  for (const auto& e : kErrors)
    if (e.code == r) return e;
  return kErrors[std::size(kErrors) - 1];
}

}  // namespace

UMEM_DOUBLE_EXPORT const char* hipGetErrorName(hip_error r) { return error_of(r).name; }
UMEM_DOUBLE_EXPORT const char* hipGetErrorString(hip_error r) { return error_of(r).text; }

UMEM_DOUBLE_EXPORT hip_error hipGetDeviceCount(int* count) {
  return answer("hipGetDeviceCount", count, [](const state& s) { return s.device_count; });
}

UMEM_DOUBLE_EXPORT hip_error hipGetDevice(int* device) {
  return answer("hipGetDevice", device, [](const state&) { return current_device; });
}

UMEM_DOUBLE_EXPORT hip_error hipSetDevice(int device) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (hip_error r; injected(s, "hipSetDevice", r)) return r;
  if (device < 0 || device >= s.device_count) return res::invalid_device;
  current_device = device;
  return succeeded(s, "hipSetDevice");
}

UMEM_DOUBLE_EXPORT hip_error hipEventCreateWithFlags(hip_event* event, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  constexpr unsigned known = flag::blocking_sync | flag::disable_timing | flag::interprocess;
  if (event == nullptr || (flags & ~known) != 0) return res::invalid_value;
  if (hip_error r; injected(s, "hipEventCreateWithFlags", r)) return r;
  const std::uintptr_t handle = kEventTag + s.next_event++;
  s.events[handle] = s.last_created = event_state{current_device, flags, false, nullptr};
  *event = reinterpret_cast<hip_event>(handle);
  return succeeded(s, "hipEventCreateWithFlags");
}

UMEM_DOUBLE_EXPORT hip_error hipEventRecord(hip_event event, hip_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  event_state* e = find_event(s, event);
  if (e == nullptr) return res::invalid_handle;
  // The null stream is the current device's: an event of another device cannot mark it.
  if (stream == nullptr && e->device != current_device) return res::invalid_handle;
  if (hip_error r; injected(s, "hipEventRecord", r)) return r;
  e->stream = stream;
  e->pending = s.busy.contains(stream);
  return succeeded(s, "hipEventRecord");
}

UMEM_DOUBLE_EXPORT hip_error hipEventQuery(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  const event_state* e = find_event(s, event);
  if (e == nullptr) return res::invalid_handle;
  if (hip_error r; injected(s, "hipEventQuery", r)) return r;
  ++s.calls["hipEventQuery"];
  return e->pending ? res::not_ready : res::success;
}

#if UMEM_HIP_DOUBLE_WITH_SYNCHRONIZE
UMEM_DOUBLE_EXPORT hip_error hipEventSynchronize(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  event_state* e = find_event(s, event);
  if (e == nullptr) return res::invalid_handle;
  if (hip_error r; injected(s, "hipEventSynchronize", r)) return r;
  e->pending = false;  // the host waited until the GPU passed the mark
  return succeeded(s, "hipEventSynchronize");
}
#endif

UMEM_DOUBLE_EXPORT hip_error hipEventDestroy(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (s.events.erase(reinterpret_cast<std::uintptr_t>(event)) == 0) return res::invalid_handle;
  return succeeded(s, "hipEventDestroy");
}

// --- Test controls -------------------------------------------------------------------------

// `device_count` devices; forgets busy streams, injected failures and call counts (live events
// stay: their owners still destroy them).
UMEM_DOUBLE_EXPORT void umem_hip_double_reset(int device_count) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.device_count = device_count;
  s.busy.clear();
  s.calls.clear();
  s.fail_next.clear();
}

// Work queued on `stream` from now on does not complete until umem_hip_double_complete.
UMEM_DOUBLE_EXPORT void umem_hip_double_pending(void* stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.busy.insert(stream);
}

// `stream` finishes its queued work: its events complete and it is idle again.
UMEM_DOUBLE_EXPORT void umem_hip_double_complete(void* stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.busy.erase(stream);
  for (auto& [handle, e] : s.events)
    if (e.stream == stream) e.pending = false;
}

UMEM_DOUBLE_EXPORT void umem_hip_double_complete_all() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.busy.clear();
  for (auto& [handle, e] : s.events) e.pending = false;
}

// Successful calls of `call` ("hipEventRecord") since the last reset.
UMEM_DOUBLE_EXPORT long umem_hip_double_calls(const char* call) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  auto it = s.calls.find(call);
  return it == s.calls.end() ? 0 : it->second;
}

// Events created and not destroyed.
UMEM_DOUBLE_EXPORT int umem_hip_double_live_events() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.events.size());
}

// The calling thread's current device.
UMEM_DOUBLE_EXPORT int umem_hip_double_current_device() { return current_device; }

// The device the last event was created on and its flags; -1 before any event.
UMEM_DOUBLE_EXPORT int umem_hip_double_last_event_device() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.last_created.device;
}
UMEM_DOUBLE_EXPORT long umem_hip_double_last_event_flags() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.last_created.device < 0 ? -1 : static_cast<long>(s.last_created.flags);
}

// The next call of `call` answers `result` (a hipError_t) and does nothing else.
UMEM_DOUBLE_EXPORT void umem_hip_double_fail_next(const char* call, int result) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.fail_next[call] = result;
}
