// Events and streams: hipEventCreateWithFlags, hipEventRecord, hipEventQuery, hipEventSynchronize
// (not in the partial build), hipEventDestroy, hipStreamSynchronize, hipDeviceSynchronize, and the
// controls that make a stream busy or let it finish (Note [What the HIP double is]).
#include "double_state.hpp"

namespace umem::hip_double {
namespace {

// Event handles: a tag above any pointer a test uses, plus a serial number; never dereferenced.
constexpr std::uintptr_t kEventTag = 0xE7E70000u;

event_state* find_event(state& s, hip_event e) {
  auto it = s.events.find(reinterpret_cast<std::uintptr_t>(e));
  return it == s.events.end() ? nullptr : &it->second;
}

}  // namespace

void finish_stream(state& s, void* stream) {
  s.busy.erase(stream);
  for (auto& [handle, e] : s.events)
    if (e.stream == stream) e.pending = false;
}

void sync_device(state& s, int device) {
  for (auto& [handle, e] : s.events) {
    if (e.device != device) continue;
    e.pending = false;
    if (e.recorded) s.busy.erase(e.stream);  // a stream of this device
  }
}

}  // namespace umem::hip_double

using namespace umem::hip_double;

UMEM_DOUBLE_EXPORT hip_error hipEventCreateWithFlags(hip_event* event, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipEventCreateWithFlags", true);
  constexpr unsigned known =
      event_flag::blocking_sync | event_flag::disable_timing | event_flag::interprocess;
  if (event == nullptr || (flags & ~known) != 0) return result::invalid_value;
  if (hip_error r; injected(s, "hipEventCreateWithFlags", r)) return r;
  const std::uintptr_t handle = kEventTag + s.next_event++;
  s.events[handle] = s.last_created = event_state{current_device(), flags, false, nullptr, false};
  *event = reinterpret_cast<hip_event>(handle);
  return succeeded(s, "hipEventCreateWithFlags");
}

UMEM_DOUBLE_EXPORT hip_error hipEventRecord(hip_event event, hip_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipEventRecord", true);
  event_state* e = find_event(s, event);
  if (e == nullptr) return result::invalid_handle;
  // The null stream is the current device's: an event of another device cannot mark it.
  if (stream == nullptr && e->device != current_device()) return result::invalid_handle;
  if (hip_error r; injected(s, "hipEventRecord", r)) return r;
  e->stream = stream;
  e->recorded = true;
  e->pending = s.busy.contains(stream);
  return succeeded(s, "hipEventRecord");
}

UMEM_DOUBLE_EXPORT hip_error hipEventQuery(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipEventQuery", true);
  const event_state* e = find_event(s, event);
  if (e == nullptr) return result::invalid_handle;
  if (hip_error r; injected(s, "hipEventQuery", r)) return r;
  ++s.calls["hipEventQuery"];
  return e->pending ? result::not_ready : result::success;
}

#if UMEM_HIP_DOUBLE_WITH_SYNCHRONIZE
UMEM_DOUBLE_EXPORT hip_error hipEventSynchronize(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipEventSynchronize", true);
  event_state* e = find_event(s, event);
  if (e == nullptr) return result::invalid_handle;
  if (hip_error r; injected(s, "hipEventSynchronize", r)) return r;
  e->pending = false;  // the host waited until the GPU passed the mark
  return succeeded(s, "hipEventSynchronize");
}
#endif

UMEM_DOUBLE_EXPORT hip_error hipEventDestroy(hip_event event) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipEventDestroy", true);
  if (s.events.erase(reinterpret_cast<std::uintptr_t>(event)) == 0) return result::invalid_handle;
  return succeeded(s, "hipEventDestroy");
}

// The host waits for `stream`'s queued work: its events complete and it is idle. Any pointer is a
// stream to the double (it makes none), the null stream included.
UMEM_DOUBLE_EXPORT hip_error hipStreamSynchronize(hip_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipStreamSynchronize", true);
  if (hip_error r; injected(s, "hipStreamSynchronize", r)) return r;
  finish_stream(s, stream);
  return succeeded(s, "hipStreamSynchronize");
}

// The host waits for the current device's work: its events complete and the streams they were
// recorded on go idle. A busy stream no event of this device was recorded on stays busy (the
// double cannot tell its device).
UMEM_DOUBLE_EXPORT hip_error hipDeviceSynchronize() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  count_attempt(s, "hipDeviceSynchronize", true);
  if (hip_error r; injected(s, "hipDeviceSynchronize", r)) return r;
  sync_device(s, current_device());
  return succeeded(s, "hipDeviceSynchronize");
}

// --- Test controls -------------------------------------------------------------------------

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
  finish_stream(s, stream);
}

UMEM_DOUBLE_EXPORT void umem_hip_double_complete_all() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.busy.clear();
  for (auto& [handle, e] : s.events) e.pending = false;
}

// Events created and not destroyed.
UMEM_DOUBLE_EXPORT int umem_hip_double_live_events() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.events.size());
}

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
