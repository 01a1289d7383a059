// Helpers for the CUDA suites: the CUDA double's path, call log and controls, and the machine it
// serves (h200_machine.hpp).
#pragma once

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cuda_runtime/h200_machine.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/core/topology.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::test {

inline const std::vector<std::string>& cuda_double_candidates() {
  static const std::vector<std::string> c{UMEM_CUDA_DOUBLE_PATH};
  return c;
}

// The same double built without the virtual memory API (a driver before CUDA 10.2).
inline const std::vector<std::string>& cuda_double_no_vmm_candidates() {
  static const std::vector<std::string> c{UMEM_CUDA_DOUBLE_NO_VMM_PATH};
  return c;
}

// The double the controls below talk to: the full one, or the one without the virtual memory
// API while a use_cuda_double_without_vmm lives (each library has its own state).
inline std::string& active_cuda_double() {
  static std::string path = UMEM_CUDA_DOUBLE_PATH;
  return path;
}
class use_cuda_double_without_vmm {
 public:
  use_cuda_double_without_vmm() { active_cuda_double() = UMEM_CUDA_DOUBLE_NO_VMM_PATH; }
  ~use_cuda_double_without_vmm() { active_cuda_double() = UMEM_CUDA_DOUBLE_PATH; }
  use_cuda_double_without_vmm(const use_cuda_double_without_vmm&) = delete;
  use_cuda_double_without_vmm& operator=(const use_cuda_double_without_vmm&) = delete;
};

// Calls a test control of the (loaded) CUDA double.
template <class Fn>
Fn cuda_double_control(const char* name) {
  void* h = dlopen(active_cuda_double().c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  auto fn = reinterpret_cast<Fn>(dlsym(h, name));
  dlclose(h);  // still loaded by the test's cuda_driver
  return fn;
}

inline std::string cuda_double_log() {
  auto fn = cuda_double_control<const char* (*)()>("umem_cuda_double_call_log");
  return fn != nullptr ? fn() : "<double not loaded>";
}
inline void cuda_double_reset() {
  if (auto fn = cuda_double_control<void (*)()>("umem_cuda_double_reset")) fn();
}
inline void cuda_double_hold_events(bool hold) {
  if (auto fn = cuda_double_control<void (*)(int)>("umem_cuda_double_hold_events")) fn(hold);
}
inline int cuda_double_retains(int device) {
  auto fn = cuda_double_control<int (*)(int)>("umem_cuda_double_retains");
  return fn != nullptr ? fn(device) : -2;
}
// Device memory allocated on `device` and not freed (-1: no such device, -2: not loaded).
inline long long cuda_double_device_bytes_in_use(int device) {
  auto fn = cuda_double_control<long long (*)(int)>("umem_cuda_double_device_bytes_in_use");
  return fn != nullptr ? fn(device) : -2;
}
// cuMemHostRegister registrations not yet unregistered (-2: not loaded).
inline int cuda_double_registrations() {
  auto fn = cuda_double_control<int (*)()>("umem_cuda_double_registrations");
  return fn != nullptr ? fn() : -2;
}
// VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED as the double answers it (1 after every reset).
inline void cuda_double_set_vmm_supported(bool supported) {
  if (auto fn = cuda_double_control<void (*)(int)>("umem_cuda_double_set_vmm_supported"))
    fn(supported);
}
// The next call of the entry point `call` fails with `result`.
inline void cuda_double_fail_next(const char* call, int result) {
  if (auto fn = cuda_double_control<void (*)(const char*, int)>("umem_cuda_double_fail_next"))
    fn(call, result);
}
// cuMemCreate handles and cuMemAddressReserve reservations outstanding (-2: not loaded).
inline int cuda_double_vmm_handles() {
  auto fn = cuda_double_control<int (*)()>("umem_cuda_double_vmm_handles");
  return fn != nullptr ? fn() : -2;
}
inline int cuda_double_vmm_reservations() {
  auto fn = cuda_double_control<int (*)()>("umem_cuda_double_vmm_reservations");
  return fn != nullptr ? fn() : -2;
}
// How often `what` ("mem_alloc ", "register ") starts a line of the double's call log.
inline int cuda_double_calls(const std::string& what) {
  const std::string log = "\n" + cuda_double_log();
  int n = 0;
  for (std::size_t at = log.find("\n" + what); at != std::string::npos;
       at = log.find("\n" + what, at + 1))
    ++n;
  return n;
}

// Writes `machine` as the double's snapshot and points the double at it; resets the double.
class cuda_double_machine {
 public:
  explicit cuda_double_machine(const umem::topology& machine)
      : file_(write_snapshot(dir_, machine)), snap_("UMEM_CUDA_DOUBLE_SNAPSHOT", file_.string()) {
    cuda_double_reset();
  }
  ~cuda_double_machine() { cuda_double_reset(); }
  cuda_double_machine(const cuda_double_machine&) = delete;
  cuda_double_machine& operator=(const cuda_double_machine&) = delete;

 private:
  temp_dir dir_;
  std::filesystem::path file_;
  scoped_env snap_;
};

// The calling thread's current CUDA context, as the driver reports it.
inline cuda::cu_context current_context(const cuda::cuda_driver& drv) {
  cuda::cu_context c = nullptr;
  drv.check(drv.fn().cuCtxGetCurrent(&c), "cuCtxGetCurrent");
  return c;
}

}  // namespace umem::test
