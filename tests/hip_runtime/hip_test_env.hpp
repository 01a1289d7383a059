// Helpers for suites that use the HIP runtime double (tests/hip_double): mapping it into the
// process as PyTorch for ROCm maps libamdhip64 (umem never does), its controls, and what the
// process has mapped. The including suite defines UMEM_HIP_DOUBLE_PATH (and
// UMEM_HIP_DOUBLE_PARTIAL_PATH where it uses the double without hipEventSynchronize).
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <string>
#include <vector>

namespace umem::test {

// What umem's check says when the double's `call` answers hipErrorLaunchFailure (719), as its error
// table names it.
inline std::string hip_double_launch_failure(const char* call) {
  return std::string(call) + " failed: hipErrorLaunchFailure (unspecified launch failure) (HIP " +
         UMEM_HIP_DOUBLE_PATH + ")";
}

// Every object the process has mapped, by the name ld.so records (the main program is "").
inline std::vector<std::string> mapped_objects() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        static_cast<std::vector<std::string>*>(data)->emplace_back(
            info->dlpi_name != nullptr ? info->dlpi_name : "");
        return 0;
      },
      &out);
  return out;
}

inline bool is_mapped(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

// The test's own mapping of a HIP double, RTLD_GLOBAL as ctypes/PyTorch map libamdhip64.
class mapped_hip_double {
 public:
  explicit mapped_hip_double(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_GLOBAL)) {}
  ~mapped_hip_double() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  mapped_hip_double(const mapped_hip_double&) = delete;
  mapped_hip_double& operator=(const mapped_hip_double&) = delete;
  bool ok() const { return handle_ != nullptr; }

  // A symbol of the double: a control (umem_hip_double_*) or a HIP entry point.
  template <class Fn>
  Fn get(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(handle_, name));
  }
  void reset(int devices) const { get<void (*)(int)>("umem_hip_double_reset")(devices); }
  void pending(void* stream) const { get<void (*)(void*)>("umem_hip_double_pending")(stream); }
  void complete(void* stream) const { get<void (*)(void*)>("umem_hip_double_complete")(stream); }
  long calls(const char* call) const {
    return get<long (*)(const char*)>("umem_hip_double_calls")(call);
  }
  int live_events() const { return get<int (*)()>("umem_hip_double_live_events")(); }
  int current_device() const { return get<int (*)()>("umem_hip_double_current_device")(); }
  int last_event_device() const { return get<int (*)()>("umem_hip_double_last_event_device")(); }
  long last_event_flags() const { return get<long (*)()>("umem_hip_double_last_event_flags")(); }
  void fail_next(const char* call, int result) const {
    get<void (*)(const char*, int)>("umem_hip_double_fail_next")(call, result);
  }
  // hipSetDevice through the double itself, as the framework sets the thread's device.
  int set_device(int device) const { return get<int (*)(int)>("hipSetDevice")(device); }

 private:
  void* handle_;
};

}  // namespace umem::test
