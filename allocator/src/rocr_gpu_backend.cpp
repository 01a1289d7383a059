// The ROCr backend: the primary one (MI300A), built on hsa_runtime/ and rocr_gpu_mapper.
#include <utility>

#include "umem/allocator/gpu_backend.hpp"
#include "umem/allocator/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
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

class rocr_gpu_backend final : public gpu_backend {
 public:
  rocr_gpu_backend(std::shared_ptr<const hsa::rocr_library> lib, std::string reason)
      : lib_(std::move(lib)), reason_(std::move(reason)) {}
  const char* name() const override { return "rocr"; }
  const std::string& reason() const override { return reason_; }
  void discover(topology& topo) const override {
    if (topo.hsa.state == runtime_state::not_probed) hsa::discover_rocr(topo, *lib_);
  }
  bool host_memory_gpu_accessible(const topology& topo) const override {
    return topo.xnack_enabled() == true;
  }
  std::unique_ptr<gpu_mapper> make_mapper(const topology& topo) const override {
    return std::make_unique<owning_rocr_mapper>(lib_, topo);
  }
  // Every GPU keeps host memory for now, discrete ones (MI300X) too (gpu_backend.hpp).
  std::unique_ptr<device_memory_source> make_device_memory_source(const topology&,
                                                                  int) const override {
    return nullptr;
  }
  bool has_stream_events() const override { return false; }
  std::unique_ptr<stream_event> make_stream_event(int) const override {
    throw_error(errc::unsupported,
                "stream events are not implemented for the ROCr backend yet (HSA signals would "
                "carry them); synchronise the stream before freeing memory a kernel may still use");
  }

 private:
  std::shared_ptr<const hsa::rocr_library> lib_;
  std::string reason_;
};

}  // namespace

std::shared_ptr<const gpu_backend> make_rocr_backend(const std::string& rocr_path,
                                                     std::string reason) {
  const std::string candidates[] = {rocr_path};
  auto lib = std::make_shared<const hsa::rocr_library>(hsa::rocr_library::load_from(candidates));
  return std::make_shared<rocr_gpu_backend>(std::move(lib), std::move(reason));
}

}  // namespace umem::alloc
