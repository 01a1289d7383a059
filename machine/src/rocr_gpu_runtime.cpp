// The ROCr runtime: the primary one (MI300A), built on hsa_runtime/. In a process that has loaded
// HIP (PyTorch for ROCm), streams get HIP events (hip_stream_event.hpp) and the allocator
// registers its memory with HIP (allocator/gpu/gpu_visibility.hpp chooses).
#include <string>
#include <utility>

#include "hip_stream_event.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hip_runtime/hip_runtime.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::machine {
namespace {

// The HIP runtime already loaded in this process, or null; `events` says which, in a few words.
// Looked up once, when the runtime is made (at live-machine discovery): PyTorch for ROCm has
// mapped HIP at `import torch`, before its first allocation creates umem's bridge. A HIP loaded
// after that is not seen by this runtime.
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

class rocr_gpu_runtime final : public gpu_runtime {
 public:
  rocr_gpu_runtime(std::shared_ptr<const hsa::rocr_library> lib,
                   std::shared_ptr<const hip::hip_runtime> hip, std::string events,
                   const std::string& reason)
      : lib_(std::move(lib)),
        hip_(std::move(hip)),
        events_(std::move(events)),
        reason_(reason + "; " + events_) {}
  gpu_runtime_kind kind() const override { return gpu_runtime_kind::rocr; }
  const std::string& reason() const override { return reason_; }
  void discover(topology& topo) const override {
    if (topo.hsa.state == runtime_state::not_probed) hsa::discover_rocr(topo, *lib_);
  }
  bool host_memory_gpu_accessible(const topology& topo) const override {
    return topo.xnack_enabled() == true;
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
  std::shared_ptr<const hsa::rocr_library> rocr() const override { return lib_; }
  std::shared_ptr<const hip::hip_runtime> hip() const override { return hip_; }

 private:
  std::shared_ptr<const hsa::rocr_library> lib_;
  std::shared_ptr<const hip::hip_runtime> hip_;  // null: no stream events
  std::string events_;                           // "stream events: HIP <path>" or why not
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_runtime> make_rocr_runtime(std::shared_ptr<const hsa::rocr_library> rocr,
                                                     std::string reason) {
  if (!rocr) throw_error(errc::invalid_argument, "make_rocr_runtime: no ROCr library given");
  std::string events;
  auto hip = loaded_hip(events);
  return std::make_shared<rocr_gpu_runtime>(std::move(rocr), std::move(hip), std::move(events),
                                            std::move(reason));
}

}  // namespace umem::machine
