// The ROCr runtime's stream events: a timing-free hipEvent on the HIP runtime PyTorch for ROCm
// has loaded (hip_runtime.hpp), recorded on the hipStream_t PyTorch passes.
//
// Device numbering: `device` is the HIP device ordinal, taken to be the index of the GPU among
// umem's topology GPUs (both list ROCr's GPU agents in enumeration order); HIP_VISIBLE_DEVICES /
// ROCR_VISIBLE_DEVICES reordering is not followed, as CUDA_VISIBLE_DEVICES is not for CUDA.
#pragma once

#include <memory>

#include "umem/hip_runtime/hip_runtime.hpp"
#include "umem/machine/stream_event.hpp"

namespace umem::machine {

class hip_stream_event final : public stream_event {
 public:
  // hipEventCreateWithFlags(hipEventDisableTiming) with `device` current, then the caller's
  // device again. Throws umem::error: invalid_argument for a device HIP does not have;
  // runtime_error naming the HIP call that failed.
  hip_stream_event(std::shared_ptr<const hip::hip_runtime> rt, int device);
  ~hip_stream_event() override;  // hipEventDestroy; a failure is logged
  hip_stream_event(const hip_stream_event&) = delete;
  hip_stream_event& operator=(const hip_stream_event&) = delete;

  // hipEventRecord on `stream` (a hipStream_t; null is the device's null stream, so the event's
  // device is made current for the call).
  void record(void* stream) override;
  // hipEventQuery: hipErrorNotReady is false, hipSuccess true, anything else umem::error.
  bool query() override;
  void synchronize() override;  // hipEventSynchronize

 private:
  std::shared_ptr<const hip::hip_runtime> rt_;
  int device_;
  hip::hip_event event_ = nullptr;
};

}  // namespace umem::machine
