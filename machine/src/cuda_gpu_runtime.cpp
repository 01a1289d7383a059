// The CUDA runtime: NVIDIA GPUs through the dlopen'd driver (cuda_runtime/).
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_context.hpp"
#include "umem/cuda_runtime/cuda_discovery.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::machine {
namespace {

namespace cc = cuda::cuda_compat;

// A timing-free cuEvent in the device's primary context (the one PyTorch's streams live in).
class cuda_stream_event final : public stream_event {
 public:
  cuda_stream_event(std::shared_ptr<const cuda::cuda_driver> drv, int device)
      : drv_(std::move(drv)), ctx_(*drv_, device) {
    const cuda::cuda_context_scope scope(ctx_);
    drv_->check(drv_->fn().cuEventCreate(&event_, cc::event_flag::disable_timing),
                "cuEventCreate");
  }
  ~cuda_stream_event() override {
    const cuda::cu_result r = drv_->fn().cuEventDestroy_v2(event_);
    if (r != 0) log().error("cuEventDestroy failed: {}", drv_->result_text(r));
  }
  cuda_stream_event(const cuda_stream_event&) = delete;
  cuda_stream_event& operator=(const cuda_stream_event&) = delete;

  void record(void* stream) override {
    const cuda::cuda_context_scope scope(ctx_);
    drv_->check(drv_->fn().cuEventRecord(event_, static_cast<cuda::cu_stream>(stream)),
                "cuEventRecord");
  }
  bool query() override {
    const cuda::cuda_context_scope scope(ctx_);
    const cuda::cu_result r = drv_->fn().cuEventQuery(event_);
    if (r == cc::result::not_ready) return false;
    drv_->check(r, "cuEventQuery");
    return true;
  }
  void synchronize() override {
    const cuda::cuda_context_scope scope(ctx_);
    drv_->check(drv_->fn().cuEventSynchronize(event_), "cuEventSynchronize");
  }

 private:
  std::shared_ptr<const cuda::cuda_driver> drv_;
  cuda::cuda_primary_context ctx_;
  cuda::cu_event event_ = nullptr;
};

class cuda_gpu_runtime final : public gpu_runtime {
 public:
  cuda_gpu_runtime(std::shared_ptr<const cuda::cuda_driver> drv, std::string reason)
      : drv_(std::move(drv)), reason_(std::move(reason)) {}
  gpu_runtime_kind kind() const override { return gpu_runtime_kind::cuda; }
  const std::string& reason() const override { return reason_; }
  void discover(topology& topo) const override { cuda::discover_cuda(topo, *drv_); }
  bool host_memory_gpu_accessible(const topology& topo) const override {
    bool any = false, all = true;
    for (const agent* g : topo.gpus()) {
      if (!g->cuda) continue;
      any = true;
      all = all && g->cuda->pageable_memory_access == true;
    }
    return any && all;
  }
  bool has_stream_events() const override { return true; }
  std::unique_ptr<stream_event> make_stream_event(int device) const override {
    int count = 0;
    drv_->check(drv_->fn().cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (device < 0 || device >= count)
      throw_error(errc::invalid_argument, "make_stream_event: CUDA device " +
                                              std::to_string(device) + " does not exist (" +
                                              std::to_string(count) + " devices)");
    return std::make_unique<cuda_stream_event>(drv_, device);
  }
  std::shared_ptr<const cuda::cuda_driver> cuda_driver() const override { return drv_; }

 private:
  std::shared_ptr<const cuda::cuda_driver> drv_;
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_runtime> make_cuda_runtime(std::shared_ptr<const cuda::cuda_driver> drv,
                                                     std::string reason) {
  return std::make_shared<cuda_gpu_runtime>(std::move(drv), std::move(reason));
}

}  // namespace umem::machine
