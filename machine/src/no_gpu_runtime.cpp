// The runtime of a node without a usable GPU runtime: host NUMA memory, immediate events.
#include <utility>

#include "umem/machine/gpu_runtime.hpp"

namespace umem::machine {
namespace {

// No GPU can be using host-only memory, so every point is already passed.
class immediate_event final : public stream_event {
 public:
  void record(void*) override {}
  bool query() override { return true; }
  void synchronize() override {}
};

class no_gpu_runtime final : public gpu_runtime {
 public:
  explicit no_gpu_runtime(std::string reason) : reason_(std::move(reason)) {}
  gpu_runtime_kind kind() const override { return gpu_runtime_kind::none; }
  const std::string& reason() const override { return reason_; }
  void discover(topology&) const override {}
  bool host_memory_gpu_accessible(const topology&) const override { return false; }
  bool has_stream_events() const override { return true; }
  std::unique_ptr<stream_event> make_stream_event(int) const override {
    return std::make_unique<immediate_event>();
  }

 private:
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_runtime> make_no_runtime(std::string reason) {
  return std::make_shared<no_gpu_runtime>(std::move(reason));
}

}  // namespace umem::machine
