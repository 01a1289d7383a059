// Makes a HIP device current on the calling thread for one scope, and restores the thread's
// previous device afterwards: HIP's current device is per-thread state of the caller (PyTorch's
// device guard), which umem must leave as it found it, as cuda_context_scope does for contexts.
#pragma once

#include "umem/hip_runtime/hip_runtime.hpp"

namespace umem::hip {

class hip_device_scope {
 public:
  // hipGetDevice, then hipSetDevice(device) when another one is current. `rt` must outlive the
  // scope. Throws umem::error(runtime_error) naming the call that failed.
  hip_device_scope(const hip_runtime& rt, int device);
  ~hip_device_scope();  // hipSetDevice(previous); a failure is logged (a destructor cannot throw)
  hip_device_scope(const hip_device_scope&) = delete;
  hip_device_scope& operator=(const hip_device_scope&) = delete;

 private:
  const hip_runtime& rt_;
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace umem::hip
