// The HIP double's shared state (Note [What the HIP double is] in double_state.hpp), the bookkeeping
// every entry point shares, and the test controls that read or reset it.
#include "double_state.hpp"

#include <unistd.h>

#include <cstdlib>

namespace umem::hip_double {

state& the_state() {
  static state s;
  return s;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

void count_attempt(state& s, const char* call, bool in_total) {
  ++s.attempts[call];
  if (in_total) ++s.total_attempts;
}

bool injected(state& s, const char* call, hip_error& out) {
  auto it = s.fail_next.find(call);
  if (it == s.fail_next.end()) return false;
  out = it->second;
  s.fail_next.erase(it);
  return true;
}

namespace {
// Successful calls made on the calling thread, by entry point (not reset: a thread's own record).
std::map<std::string, long>& this_thread_calls() {
  thread_local std::map<std::string, long> calls;
  return calls;
}
}  // namespace

hip_error succeeded(state& s, const char* call) {
  ++s.calls[call];
  ++this_thread_calls()[call];
  return result::success;
}

bool enter_memory(state& s, const char* call, hip_error& out) {
  count_attempt(s, call, true);
  if (injected(s, call, out)) return true;
  if (s.rocr.attached() && getpid() != s.rocr.pid) {
    ++s.forked_child_calls;
    out = result::invalid_value;  // a forked child: Note [What the HIP double is]
    return true;
  }
  if (s.rocr.attached()) return false;
  // Test-only variable: the double is not part of umem, so it reads it directly.
  const char* path = std::getenv("UMEM_HIP_DOUBLE_ROCR");
  if (path != nullptr && *path != '\0') {
    if (std::string why = attach(s.rocr, path); why.empty()) {
      s.devices_before_attach = s.device_count;
      s.device_count = static_cast<int>(s.rocr.devices.size());
      return false;
    } else {
      s.last_message = why;
    }
  }
  out = result::no_device;  // no ROCr under this HIP: no GPU
  return true;
}

}  // namespace umem::hip_double

using namespace umem::hip_double;

// --- Test controls -------------------------------------------------------------------------

// `device_count` devices (while a ROCr is attached, ROCr's count stays); forgets busy streams,
// injected failures, and every count (calls, attempts, CPU copies, leaked registrations). Live
// events and memory objects stay: their owners still destroy them.
UMEM_DOUBLE_EXPORT void umem_hip_double_reset(int device_count) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!s.rocr.attached()) s.device_count = device_count;
  s.busy.clear();
  s.calls.clear();
  s.attempts.clear();
  s.total_attempts = 0;
  s.cpu_copies = 0;
  s.leaked_registrations = 0;
  s.fail_next.clear();
}

// Successful calls of `call` ("hipEventRecord") since the last reset.
UMEM_DOUBLE_EXPORT long umem_hip_double_calls(const char* call) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  auto it = s.calls.find(call);
  return it == s.calls.end() ? 0 : it->second;
}

// Successful calls of `call` the calling thread made, ever: which thread would wait in a call such
// as hipHostUnregister, whose SyncAllStreams the double completes at once.
UMEM_DOUBLE_EXPORT long umem_hip_double_calls_on_this_thread(const char* call) {
  const std::map<std::string, long>& calls = this_thread_calls();
  auto it = calls.find(call);
  return it == calls.end() ? 0 : it->second;
}

// Every call of `call` since the last reset, failed and injected ones included.
UMEM_DOUBLE_EXPORT long umem_hip_double_attempts(const char* call) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  auto it = s.attempts.find(call);
  return it == s.attempts.end() ? 0 : it->second;
}

// Every call of a memory or event entry point since the last reset (hipGetDevice, hipSetDevice,
// hipGetDeviceCount and the error strings are not counted here).
UMEM_DOUBLE_EXPORT long umem_hip_double_total_attempts() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.total_attempts;
}

// Copies clr would do on the CPU after stream.finish(): both sides unknown to HIP, allowed by
// hmmCpuMemoryAccessible or a HostToHost/Default kind (ihipMemcpy -> ihipHtoHMemcpy).
UMEM_DOUBLE_EXPORT long umem_hip_double_cpu_copies() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.cpu_copies;
}

// hipHostRegister calls that succeeded on a base already in HIP's map: clr keeps the first object
// and never releases the second (nor its locks).
UMEM_DOUBLE_EXPORT long umem_hip_double_leaked_registrations() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.leaked_registrations;
}

// Memory calls refused because they came from a forked child (Note [What the HIP double is]).
UMEM_DOUBLE_EXPORT long umem_hip_double_forked_child_calls() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.forked_child_calls;
}

// hipHostRegister objects HIP's map holds (not the leaked ones).
UMEM_DOUBLE_EXPORT int umem_hip_double_live_registrations() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  std::set<const mem_object*> live;
  for (const auto& [key, o] : s.objects)
    if (o->kind == object_kind::registered) live.insert(o.get());
  return static_cast<int>(live.size());
}

// The calling thread's current device.
UMEM_DOUBLE_EXPORT int umem_hip_double_current_device() { return current_device(); }

// The next call of `call` answers `result` (a hipError_t) and does nothing else.
UMEM_DOUBLE_EXPORT void umem_hip_double_fail_next(const char* call, int result) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.fail_next[call] = result;
}
