// Helpers for suites that use the HIP runtime double (tests/hip_double): mapping it into the
// process as PyTorch for ROCm maps libamdhip64 (umem never does), its controls and memory entry
// points, and what the process has mapped. The including suite defines UMEM_HIP_DOUBLE_PATH (and
// UMEM_HIP_DOUBLE_PARTIAL_PATH where it uses the double without hipEventSynchronize).
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::test {

// hipMemcpyKind (hip_runtime_api.h).
enum hip_memcpy_kind : int {
  hip_host_to_host = 0,
  hip_host_to_device = 1,
  hip_device_to_host = 2,
  hip_device_to_device = 3,
  hip_memcpy_default = 4,
};

// hipPointerAttribute_t (the same layout in ROCm 5, 6 and 7) and hipMemoryType in ROCm 6 numbering.
struct hip_pointer_attributes {
  int type = -1;
  int device = -1;
  void* device_pointer = nullptr;
  void* host_pointer = nullptr;
  int is_managed = -1;
  unsigned allocation_flags = 0;
};
enum hip_memory_type : int {
  hip_memory_unregistered = 0,
  hip_memory_host = 1,
  hip_memory_device = 2,
  hip_memory_managed = 3,
};

// A snapshot that claims XNACK on (or off) as ROCr would report it with HSA_XNACK=1 (=0) before
// hsa_init: XNACK_ENABLED, the GPU ISAs' "xnack+" suffix, and SVM_ACCESSIBLE_BY_DEFAULT, which ROCr
// answers true exactly when every GPU agent's ISA has XNACK enabled (ROCR-Runtime
// runtime/hsa-runtime/core/runtime/runtime.cpp GetSystemInfo). HIP reads that last one as
// hmmCpuMemoryAccessible_; the ROCr double answers it only from the snapshot, and a rocminfo
// capture does not carry it, so a HIP test that wants XNACK on must claim it here.
inline void claim_xnack(umem::topology& t, bool on) {
  t.hsa.xnack_enabled = on;
  t.hsa.svm_accessible_by_default = on;
  const std::string from = on ? ":xnack-" : ":xnack+";
  const std::string to = on ? ":xnack+" : ":xnack-";
  for (auto& a : t.agents)
    for (auto& isa : a.isas)
      if (auto pos = isa.find(from); pos != std::string::npos) isa.replace(pos, from.size(), to);
}

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
  void complete_all() const { get<void (*)()>("umem_hip_double_complete_all")(); }
  void fail_next(const char* call, int result) const {
    get<void (*)(const char*, int)>("umem_hip_double_fail_next")(call, result);
  }
  // hipSetDevice through the double itself, as the framework sets the thread's device.
  int set_device(int device) const { return get<int (*)(int)>("hipSetDevice")(device); }
  int device_count() const {
    int n = -1;
    get<int (*)(int*)>("hipGetDeviceCount")(&n);
    return n;
  }

  // --- Memory controls (Note [What the HIP double is] in tests/hip_double/double_state.hpp) ---
  // Runs HIP over the ROCr at `path` (the ROCr double): 0, or -1 with last_message().
  int attach_rocr(const char* path) const {
    return get<int (*)(const char*)>("umem_hip_double_attach_rocr")(path);
  }
  void detach_rocr() const { get<void (*)()>("umem_hip_double_detach_rocr")(); }
  std::string last_message() const {
    return get<const char* (*)()>("umem_hip_double_last_message")();
  }
  // 0: HIP does not know `p`; 1: an object of HIP's map; 2: the arena (ROCr memory).
  int known(const void* p) const { return get<int (*)(const void*)>("umem_hip_double_known")(p); }
  // Every call of `call` since the last reset, failed ones included; of all memory and event
  // entry points together.
  long attempts(const char* call) const {
    return get<long (*)(const char*)>("umem_hip_double_attempts")(call);
  }
  long total_attempts() const { return get<long (*)()>("umem_hip_double_total_attempts")(); }
  long cpu_copies() const { return get<long (*)()>("umem_hip_double_cpu_copies")(); }
  long leaked_registrations() const {
    return get<long (*)()>("umem_hip_double_leaked_registrations")();
  }
  int live_registrations() const {
    return get<int (*)()>("umem_hip_double_live_registrations")();
  }

  // --- HIP memory entry points, as PyTorch for ROCm calls them (hipError_t as int) ---
  int malloc(void** p, std::size_t n) const {
    return get<int (*)(void**, std::size_t)>("hipMalloc")(p, n);
  }
  int free(void* p) const { return get<int (*)(void*)>("hipFree")(p); }
  int host_malloc(void** p, std::size_t n, unsigned flags = 0) const {
    return get<int (*)(void**, std::size_t, unsigned)>("hipHostMalloc")(p, n, flags);
  }
  int host_alloc(void** p, std::size_t n, unsigned flags = 0) const {
    return get<int (*)(void**, std::size_t, unsigned)>("hipHostAlloc")(p, n, flags);
  }
  int host_free(void* p) const { return get<int (*)(void*)>("hipHostFree")(p); }
  int malloc_managed(void** p, std::size_t n, unsigned flags = 1 /* hipMemAttachGlobal */) const {
    return get<int (*)(void**, std::size_t, unsigned)>("hipMallocManaged")(p, n, flags);
  }
  int host_register(void* p, std::size_t n, unsigned flags = 0) const {
    return get<int (*)(void*, std::size_t, unsigned)>("hipHostRegister")(p, n, flags);
  }
  int host_unregister(void* p) const { return get<int (*)(void*)>("hipHostUnregister")(p); }
  int memset(void* p, int value, std::size_t n) const {
    return get<int (*)(void*, int, std::size_t)>("hipMemset")(p, value, n);
  }
  int memset_async(void* p, int value, std::size_t n, void* stream) const {
    return get<int (*)(void*, int, std::size_t, void*)>("hipMemsetAsync")(p, value, n, stream);
  }
  int memcpy(void* dst, const void* src, std::size_t n, int kind) const {
    return get<int (*)(void*, const void*, std::size_t, int)>("hipMemcpy")(dst, src, n, kind);
  }
  int memcpy_async(void* dst, const void* src, std::size_t n, int kind, void* stream) const {
    return get<int (*)(void*, const void*, std::size_t, int, void*)>("hipMemcpyAsync")(
        dst, src, n, kind, stream);
  }
  int pointer_attributes(hip_pointer_attributes* a, const void* p) const {
    return get<int (*)(hip_pointer_attributes*, const void*)>("hipPointerGetAttributes")(a, p);
  }
  int host_get_device_pointer(void** device, void* host, unsigned flags = 0) const {
    return get<int (*)(void**, void*, unsigned)>("hipHostGetDevicePointer")(device, host, flags);
  }
  int mem_get_address_range(void** base, std::size_t* size, void* p) const {
    return get<int (*)(void**, std::size_t*, void*)>("hipMemGetAddressRange")(base, size, p);
  }
  int stream_synchronize(void* stream) const {
    return get<int (*)(void*)>("hipStreamSynchronize")(stream);
  }
  int device_synchronize() const { return get<int (*)()>("hipDeviceSynchronize")(); }

 private:
  void* handle_;
};

}  // namespace umem::test
