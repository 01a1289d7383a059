#include "umem/allocator/gpu/gpu_visibility.hpp"

#include <string>
#include <utility>

#include "umem/allocator/gpu/cuda_device_source.hpp"
#include "umem/allocator/gpu/cuda_gpu_mapper.hpp"
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/gpu/rocr_device_source.hpp"
#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"
#include "umem/hip_runtime/hip_runtime.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_memory_kind.hpp"

namespace umem::alloc {
namespace {

using machine::gpu_runtime_kind;

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

// GPU `device` of topo.gpus() (the index placements use). Throws umem::error(invalid_argument)
// naming how many GPUs the topology has.
const agent& gpu_of(const topology& topo, int device) {
  const auto gpus = topo.gpus();
  if (device < 0 || static_cast<std::size_t>(device) >= gpus.size())
    throw_error(errc::invalid_argument, "device memory: device " + std::to_string(device) +
                                            " does not exist (the topology has " +
                                            std::to_string(gpus.size()) + " GPUs)");
  return *gpus[static_cast<std::size_t>(device)];
}

}  // namespace

std::unique_ptr<gpu_mapper> make_gpu_mapper(const machine::gpu_runtime& rt, const topology& topo) {
  switch (rt.kind()) {
    case gpu_runtime_kind::rocr:
      // With HIP loaded, HIP must know every byte umem hands out (Note [GPU visibility under
      // HIP] in hip_gpu_mapper.hpp): the one place that chooses.
      if (auto hip = rt.hip()) {
        const auto xnack = topo.xnack_enabled();
        return std::make_unique<hip_gpu_mapper>(
            std::move(hip),
            std::string(!xnack ? "XNACK unknown" : *xnack ? "XNACK on" : "XNACK off") +
                ", HIP loaded");
      }
      return std::make_unique<owning_rocr_mapper>(rt.rocr(), topo);
    case gpu_runtime_kind::cuda:
      return std::make_unique<cuda_gpu_mapper>(rt.cuda_driver(), topo);
    case gpu_runtime_kind::none:
      break;
  }
  return std::make_unique<no_gpu_mapper>(rt.reason());
}

std::unique_ptr<device_memory_source> make_device_memory_source(const machine::gpu_runtime& rt,
                                                                const topology& topo, int device) {
  if (rt.kind() == gpu_runtime_kind::none) return nullptr;
  const agent& gpu = gpu_of(topo, device);
  if (machine::memory_kind_of(gpu) != machine::gpu_memory_kind::discrete) return nullptr;
  // A GPU of another runtime in the same model (CUDA agents next to ROCr ones, forced CUDA next
  // to ROCr agents) is not ours.
  if (rt.kind() == gpu_runtime_kind::rocr)
    return gpu.cuda ? nullptr
                    : std::make_unique<rocr_device_source>(rt.rocr(), gpu, device,
                                                           rt.hip() != nullptr);
  return gpu.cuda ? std::make_unique<cuda_device_source>(rt.cuda_driver(), gpu) : nullptr;
}

}  // namespace umem::alloc
