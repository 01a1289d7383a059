// Relaxed stream-capture mode for a scope, when asked (Note [Capture safety] in
// umem_cuda_allocator.cpp): a umem call that may reach the GPU runtime (registering a new
// segment, an event) while a capture in "global" mode is underway would otherwise invalidate it,
// as CUDA refuses such calls during a capture (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from
// cuMemHostRegister, seen on an H100 with PyTorch 2.11). PyTorch's allocators do the same around
// cudaMalloc and cudaHostAlloc.
#pragma once

#include <c10/cuda/CUDAGraphsC10Utils.h>

#include <optional>

namespace umem_extension {

struct relaxed_capture {
  explicit relaxed_capture(bool on) {
    if (on) guard.emplace(cudaStreamCaptureModeRelaxed);
  }
  std::optional<c10::cuda::CUDAStreamCaptureModeGuard> guard;
};

}  // namespace umem_extension
