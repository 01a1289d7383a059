// A device's primary context, retained for as long as umem needs it, and a scope that makes it
// current on the calling thread.
//
// Note [Why the primary context]
// PyTorch and the CUDA runtime work in each device's primary context. umem retains that same
// context (never creates its own), so host registrations and events it makes are the ones the
// framework's streams see, and it leaves the thread's current context as it found it.
#pragma once

#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::cuda {

class cuda_primary_context {
 public:
  // cuDeviceGet(ordinal) + cuDevicePrimaryCtxRetain. `drv` must be initialised (cuInit) and
  // outlive this object. Throws umem::error(runtime_error) naming the call that failed.
  cuda_primary_context(const cuda_driver& drv, int ordinal);
  ~cuda_primary_context();  // cuDevicePrimaryCtxRelease
  cuda_primary_context(const cuda_primary_context&) = delete;
  cuda_primary_context& operator=(const cuda_primary_context&) = delete;

  const cuda_driver& driver() const { return drv_; }
  cu_context get() const { return ctx_; }
  int ordinal() const { return ordinal_; }

 private:
  const cuda_driver& drv_;
  int ordinal_;
  cu_device dev_ = 0;
  cu_context ctx_ = nullptr;
};

// Makes `ctx` current for one scope and restores the thread's previous context afterwards.
class cuda_context_scope {
 public:
  // Throws umem::error(runtime_error) when cuCtxGetCurrent/cuCtxSetCurrent fail.
  explicit cuda_context_scope(const cuda_primary_context& ctx);
  ~cuda_context_scope();
  cuda_context_scope(const cuda_context_scope&) = delete;
  cuda_context_scope& operator=(const cuda_context_scope&) = delete;

 private:
  const cuda_driver& drv_;
  cu_context previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace umem::cuda
