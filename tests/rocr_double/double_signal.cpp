// Signals, copies and the system event handler of the double. Copies complete synchronously:
// the completion signal is decremented before hsa_amd_memory_async_copy returns, so a wait never
// blocks (HSA allows a wait to return before its condition holds).
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <cstring>

#include "double_state.hpp"

using namespace umem::rocr_double;

namespace {

hsa_status_t finish(state& s, const std::string& call, hsa_status_t st) {
  log_call(s, call + " -> " + status_name(st));
  return st;
}

hsa_signal_value_t* find_signal(const state& s, hsa_signal_t signal) {
  return s.signals.contains(signal.handle) ? reinterpret_cast<hsa_signal_value_t*>(signal.handle)
                                           : nullptr;
}

}  // namespace

UMEM_DOUBLE_EXPORT hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value,
                                                  uint32_t num_consumers,
                                                  const hsa_agent_t* consumers,
                                                  hsa_signal_t* signal) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "signal_create value=" + std::to_string(initial_value);
  if (signal == nullptr || (num_consumers > 0 && consumers == nullptr))
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  for (uint32_t i = 0; i < num_consumers; ++i)
    if (!decode_agent(s, consumers[i].handle))
      return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
  auto* value = new hsa_signal_value_t(initial_value);
  signal->handle = reinterpret_cast<std::uint64_t>(value);
  s.signals.insert(signal->handle);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  hsa_signal_value_t* value = find_signal(s, signal);
  if (value == nullptr) return finish(s, "signal_destroy", HSA_STATUS_ERROR_INVALID_SIGNAL);
  s.signals.erase(signal.handle);
  delete value;
  return finish(s, "signal_destroy", HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal,
                                                                hsa_signal_condition_t condition,
                                                                hsa_signal_value_t compare_value,
                                                                uint64_t timeout_hint,
                                                                hsa_wait_state_t wait_state_hint) {
  (void)condition, (void)compare_value, (void)timeout_hint, (void)wait_state_hint;
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  hsa_signal_value_t* value = s.init_count == 0 ? nullptr : find_signal(s, signal);
  if (value == nullptr) {
    // ROCr would crash on a bad signal; the double records the bug instead.
    log_call(s, "signal_wait_scacquire -> INVALID_SIGNAL");
    return 0;
  }
  return *value;
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent,
                                                          const void* src, hsa_agent_t src_agent,
                                                          size_t size, uint32_t num_dep_signals,
                                                          const hsa_signal_t* dep_signals,
                                                          hsa_signal_t completion_signal) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "async_copy " + name_pointer(s, dst) + " <- " + name_pointer(s, src) +
                           " size=" + std::to_string(size);
  if (dst == nullptr || src == nullptr || (num_dep_signals > 0 && dep_signals == nullptr))
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (!decode_agent(s, dst_agent.handle) || !decode_agent(s, src_agent.handle))
    return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
  hsa_signal_value_t* completion = find_signal(s, completion_signal);
  if (completion == nullptr) return finish(s, call, HSA_STATUS_ERROR_INVALID_SIGNAL);
  for (uint32_t i = 0; i < num_dep_signals; ++i) {
    const hsa_signal_value_t* dep = find_signal(s, dep_signals[i]);
    if (dep == nullptr) return finish(s, call, HSA_STATUS_ERROR_INVALID_SIGNAL);
    // A synchronous double cannot wait for a dependency nobody will ever signal.
    if (*dep != 0) return finish(s, call + " (dependency not yet satisfied)", HSA_STATUS_ERROR);
  }
  std::memmove(dst, src, size);
  --*completion;
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t
hsa_amd_register_system_event_handler(hsa_amd_system_event_callback_t callback, void* data) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  if (callback == nullptr)
    return finish(s, "register_system_event_handler", HSA_STATUS_ERROR_INVALID_ARGUMENT);
  (void)data;
  ++s.event_handlers;
  return finish(s, "register_system_event_handler", HSA_STATUS_SUCCESS);
}
