#include "umem/allocator/gpu_mapper_factory.hpp"

#include "umem/allocator/cuda_gpu_mapper.hpp"
#include "umem/allocator/no_gpu_mapper.hpp"
#include "umem/allocator/rocr_gpu_mapper.hpp"

namespace umem::alloc {

std::unique_ptr<gpu_mapper> make_gpu_mapper(const umem::topology& topo,
                                            const hsa::rocr_library* lib) {
  // A live topology names its backend (gpu_backend.hpp); captures name none and keep the
  // ROCr-only behaviour below.
  if (topo.gpu_backend.name == "none")
    return std::make_unique<no_gpu_mapper>(topo.gpu_backend.reason);
  if (topo.gpu_backend.name == "cuda")
    return std::make_unique<cuda_gpu_mapper>(
        std::make_shared<const cuda::cuda_driver>(cuda::cuda_driver::load()), topo);
  if (lib == nullptr) return std::make_unique<no_gpu_mapper>("no ROCr library was given");
  if (topo.hsa.state != runtime_state::available) {
    std::string reason = to_string(topo.hsa.state);
    if (!topo.hsa.state_reason.empty()) reason += ": " + topo.hsa.state_reason;
    return std::make_unique<no_gpu_mapper>(reason);
  }
  return std::make_unique<rocr_gpu_mapper>(topo, *lib);
}

}  // namespace umem::alloc
