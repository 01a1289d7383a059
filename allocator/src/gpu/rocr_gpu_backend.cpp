// The ROCr backend: the primary one (MI300A), built on hsa_runtime/, with discrete GPUs' (MI300X)
// own memory from their VRAM pool (rocr_device_source.hpp). In a process that has loaded HIP
// (PyTorch for ROCm), HIP must know every byte umem hands out, so segments are registered with
// HIP (hip_gpu_mapper.hpp, Note [GPU visibility under HIP]) and streams get HIP events
// (hip_stream_event.hpp); elsewhere ROCr alone makes memory GPU-accessible (rocr_gpu_mapper.hpp).
// make_mapper below is the one place that chooses.
#include <string>
#include <utility>

#include "umem/allocator/gpu/gpu_backend.hpp"
#include "umem/allocator/gpu/gpu_memory_kind.hpp"
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"
#include "umem/allocator/gpu/hip_stream_event.hpp"
#include "umem/allocator/gpu/rocr_device_source.hpp"
#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hip_runtime/hip_runtime.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {
namespace {

// A rocr_gpu_mapper that also keeps its library loaded.
class owning_rocr_mapper final : public gpu_mapper {
 public:
  owning_rocr_mapper(std::shared_ptr<const hsa::rocr_library> lib, const topology& topo)
      : lib_(std::move(lib)), mapper_(topo, *lib_) {}
  void map(const segment& s) override { mapper_.map(s); }
  void unmap(const segment& s) noexcept override { mapper_.unmap(s); }
  bool gpu_accessible() const override { return mapper_.gpu_accessible(); }
  bool pageable() const override { return mapper_.pageable(); }
  std::string describe() const override { return mapper_.describe(); }

 private:
  std::shared_ptr<const hsa::rocr_library> lib_;
  rocr_gpu_mapper mapper_;
};

// The HIP runtime already loaded in this process, or null; `events` says which, in a few words.
// Looked up once, when the backend is made (at live-machine discovery): PyTorch for ROCm has
// mapped HIP at `import torch`, before its first allocation creates umem's bridge. A HIP loaded
// after that is not seen by this backend.
std::shared_ptr<const hip::hip_runtime> loaded_hip(std::string& events) {
  try {
    if (auto rt = hip::hip_runtime::find_loaded()) {
      events = "stream events: HIP " + rt->resolved_path();
      return std::make_shared<const hip::hip_runtime>(*std::move(rt));
    }
    events = std::string("no stream events: ") + hip::kHipNotLoaded;
  } catch (const error& e) {
    // A library that is loaded but not usable: host memory still works; say so loudly.
    log().warn("the ROCr backend has no stream events: {}", e.what());
    events = std::string("no stream events: ") + e.what();
  }
  return nullptr;
}

class rocr_gpu_backend final : public gpu_backend {
 public:
  rocr_gpu_backend(std::shared_ptr<const hsa::rocr_library> lib,
                   std::shared_ptr<const hip::hip_runtime> hip, std::string events,
                   const std::string& reason)
      : lib_(std::move(lib)),
        hip_(std::move(hip)),
        events_(std::move(events)),
        reason_(reason + "; " + events_) {}
  const char* name() const override { return "rocr"; }
  const std::string& reason() const override { return reason_; }
  void discover(topology& topo) const override {
    if (topo.hsa.state == runtime_state::not_probed) hsa::discover_rocr(topo, *lib_);
  }
  bool host_memory_gpu_accessible(const topology& topo) const override {
    return topo.xnack_enabled() == true;
  }
  std::unique_ptr<gpu_mapper> make_mapper(const topology& topo) const override {
    if (hip_) {
      const auto xnack = topo.xnack_enabled();
      return std::make_unique<hip_gpu_mapper>(
          hip_, std::string(!xnack ? "XNACK unknown" : *xnack ? "XNACK on" : "XNACK off") +
                    ", HIP loaded");
    }
    return std::make_unique<owning_rocr_mapper>(lib_, topo);
  }
  std::unique_ptr<device_memory_source> make_device_memory_source(const topology& topo,
                                                                  int device) const override {
    const agent& gpu = gpu_of(topo, device);
    // A GPU of another runtime in the same model (CUDA agents next to ROCr ones) is not ours.
    if (gpu.cuda || memory_kind_of(gpu) != gpu_memory_kind::discrete) return nullptr;
    return std::make_unique<rocr_device_source>(lib_, gpu, device, hip_ != nullptr);
  }
  bool has_stream_events() const override { return hip_ != nullptr; }
  // `device` is the HIP device ordinal = the GPU's index in umem's topology (hip_stream_event.hpp).
  std::unique_ptr<stream_event> make_stream_event(int device) const override {
    if (!hip_)
      throw_error(errc::unsupported,
                  "the ROCr backend has " + events_ +
                      "; synchronise the stream before freeing memory a kernel may still use");
    return std::make_unique<hip_stream_event>(hip_, device);
  }

 private:
  std::shared_ptr<const hsa::rocr_library> lib_;
  std::shared_ptr<const hip::hip_runtime> hip_;  // null: no stream events
  std::string events_;                           // "stream events: HIP <path>" or why not
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_backend> make_rocr_backend(
    std::shared_ptr<const hsa::rocr_library> rocr, std::string reason) {
  if (!rocr) throw_error(errc::invalid_argument, "make_rocr_backend: no ROCr library given");
  std::string events;
  auto hip = loaded_hip(events);
  return std::make_shared<rocr_gpu_backend>(std::move(rocr), std::move(hip), std::move(events),
                                            std::move(reason));
}

}  // namespace umem::alloc
