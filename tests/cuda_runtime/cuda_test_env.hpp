// Helpers for the CUDA suites: the CUDA double's path, call log and controls, and the machine it
// serves: the H200 measured on the lent GPU machine (data/h200_probe_attributes.txt).
#pragma once

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

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

// The GPU as the lent H200 machine's driver answered it, read from the raw capture
// data/h200_probe_attributes.txt (tests/gpu_cuda/probe_attributes.cpp through cuda.h, not umem;
// run on 2026-11-30, driver 580.159.04). "P:n" is the line of that file.
inline umem::agent h200_agent() {
  umem::agent a;
  a.kind = umem::agent_kind::gpu;
  a.name = "sm_90";                  // P:11-12 COMPUTE_CAPABILITY 9.0
  a.marketing_name = "NVIDIA H200";  // P:3
  a.vendor_name = "NVIDIA";
  a.uuid = "GPU-56812e38-c4d4-0a77-7723-c74e0f7ea913";  // P:6, in nvidia-smi's form
  a.kfd_node = 0;
  a.compute_units = 132;           // P:7 MULTIPROCESSOR_COUNT
  a.bdfid = 0x06 << 3;             // P:4 0000:00:06.0
  a.pci_domain = 0;
  a.is_apu = false;                // P:8 INTEGRATED 0
  a.coherent_host_access = false;  // P:15 PAGEABLE_MEMORY_ACCESS 0
  umem::cuda_device_info c;
  c.ordinal = 0;
  c.cc_major = 9;
  c.cc_minor = 0;
  c.total_memory_bytes = 150109880320ull;                  // P:5
  c.integrated = false;                                    // P:8
  c.can_map_host_memory = true;                            // P:9
  c.unified_addressing = true;                             // P:10
  c.managed_memory = true;                                 // P:13
  c.pageable_memory_access = false;                        // P:15
  c.concurrent_managed_access = true;                      // P:16
  c.can_use_host_pointer_for_registered_mem = true;        // P:17
  c.host_register_supported = true;                        // P:18
  c.pageable_memory_access_uses_host_page_tables = false;  // P:19
  c.direct_managed_mem_access_from_host = false;           // P:20
  c.host_numa_id = 0;                                      // P:21
  a.cuda = c;
  return a;
}

// That machine's driver: CUDA 13.0 (P:1), serving the one H200.
inline umem::topology h200_machine() {
  umem::topology t;
  t.agents.push_back(h200_agent());
  t.cuda.driver_version = 13000;  // P:1
  return t;
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
