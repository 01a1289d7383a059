// The backend of a node without a usable GPU runtime: host NUMA memory, immediate events.
#include <utility>

#include "umem/allocator/gpu/gpu_backend.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"

namespace umem::alloc {
namespace {

// No GPU can be using host-only memory, so every point is already passed.
class immediate_event final : public stream_event {
 public:
  void record(void*) override {}
  bool query() override { return true; }
  void synchronize() override {}
};

class no_gpu_backend final : public gpu_backend {
 public:
  explicit no_gpu_backend(std::string reason) : reason_(std::move(reason)) {}
  const char* name() const override { return "none"; }
  const std::string& reason() const override { return reason_; }
  void discover(topology&) const override {}
  bool host_memory_gpu_accessible(const topology&) const override { return false; }
  std::unique_ptr<gpu_mapper> make_mapper(const topology&) const override {
    return std::make_unique<no_gpu_mapper>(reason_);
  }
  std::unique_ptr<device_memory_source> make_device_memory_source(const topology&,
                                                                  int) const override {
    return nullptr;
  }
  bool has_stream_events() const override { return true; }
  std::unique_ptr<stream_event> make_stream_event(int) const override {
    return std::make_unique<immediate_event>();
  }

 private:
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_backend> make_no_backend(std::string reason) {
  return std::make_shared<no_gpu_backend>(std::move(reason));
}

}  // namespace umem::alloc
