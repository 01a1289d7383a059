#include "umem/allocator/gpu/cuda_gpu_mapper.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"

namespace umem::alloc {
namespace {

namespace cc = cuda::cuda_compat;
constexpr unsigned kRegisterFlags = cc::host_register::portable | cc::host_register::devicemap;

std::string address(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

std::string segment_text(const segment& s) {
  return std::to_string(s.size) + " bytes at " + address(s.base);
}

std::vector<const agent*> cuda_gpus(const topology& topo) {
  std::vector<const agent*> out;
  for (const agent* g : topo.gpus())
    if (g->cuda) out.push_back(g);
  return out;
}

std::string gpu_text(const agent& g) {
  return "CUDA device " + std::to_string(g.cuda->ordinal) + " (" + g.marketing_name + ")";
}

}  // namespace

cuda_gpu_mapper::cuda_gpu_mapper(std::shared_ptr<const cuda::cuda_driver> drv,
                                 const umem::topology& topo)
    : drv_(std::move(drv)) {
  const auto gpus = cuda_gpus(topo);
  if (gpus.empty())
    throw_error(errc::invalid_argument,
                "cuda_gpu_mapper: the topology has no CUDA GPU agent; discover it through the "
                "CUDA driver (umem::cuda::discover_cuda) first");
  bool pageable = true;
  for (const agent* g : gpus) pageable = pageable && g->cuda->pageable_memory_access == true;
  if (pageable) {
    reason_ = "every CUDA GPU has PAGEABLE_MEMORY_ACCESS: host memory is used as it is, "
              "without registration";
    log().debug("cuda_gpu_mapper: {}", describe());
    return;
  }
  for (const agent* g : gpus) {
    if (g->cuda->can_map_host_memory == false || g->cuda->host_register_supported == false)
      throw_error(errc::unsupported,
                  "cuda_gpu_mapper: " + gpu_text(*g) +
                      " can neither access pageable host memory nor map registered host memory "
                      "(CAN_MAP_HOST_MEMORY or HOST_REGISTER_SUPPORTED is 0), so umem memory "
                      "cannot be made GPU-accessible; use UMEM_GPU_BACKEND=none for host memory");
  }
  ctx_ = std::make_unique<cuda::cuda_primary_context>(*drv_,
                                                      static_cast<int>(gpus.front()->cuda->ordinal));
  reason_ = "no PAGEABLE_MEMORY_ACCESS: segments are registered with cuMemHostRegister "
            "(PORTABLE|DEVICEMAP) for every CUDA GPU at their host address";
  log().debug("cuda_gpu_mapper: {}", describe());
}

cuda_gpu_mapper::~cuda_gpu_mapper() {
  if (creator_.is_other()) (void)ctx_.release();  // Note [Fork]: no driver call in a child
}

void cuda_gpu_mapper::map(const segment& s) {
  if (s.base == nullptr || s.size == 0)
    throw_error(errc::invalid_argument,
                "cuda_gpu_mapper: a segment needs a base and a size (got " + segment_text(s) + ")");
  if (!ctx_ || creator_.is_other()) return;  // Note [Fork]: host memory only in a forked child
  const cuda::cuda_context_scope scope(*ctx_);
  const auto& fn = drv_->fn();
  if (const cuda::cu_result r = fn.cuMemHostRegister_v2(s.base, s.size, kRegisterFlags); r != 0)
    throw_error(r == cc::result::out_of_memory ? errc::out_of_memory : errc::runtime_error,
                "cuda_gpu_mapper: cannot make " + segment_text(s) +
                                         " GPU-accessible: cuMemHostRegister failed: " +
                                         drv_->result_text(r));
  cuda::cu_deviceptr device = 0;
  const cuda::cu_result r = fn.cuMemHostGetDevicePointer_v2(&device, s.base, 0);
  if (r == 0 && device == reinterpret_cast<std::uintptr_t>(s.base)) return;
  const cuda::cu_result undo = fn.cuMemHostUnregister(s.base);
  const std::string undone =
      undo == 0 ? "The registration was undone." : "It was not undone: " + drv_->result_text(undo);
  if (r != 0)
    throw_error(errc::runtime_error, "cuda_gpu_mapper: cuMemHostGetDevicePointer failed for " +
                                         segment_text(s) + ": " + drv_->result_text(r) + ". " +
                                         undone);
  throw_error(errc::unsupported,
              "cuda_gpu_mapper: the driver mapped " + segment_text(s) + " at device address " +
                  address(reinterpret_cast<void*>(static_cast<std::uintptr_t>(device))) +
                  ", not at its host address; zero-copy sharing needs one address for CPU and "
                  "GPU (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM). " + undone);
}

void cuda_gpu_mapper::unmap(const segment& s) noexcept {
  if (!ctx_ || creator_.is_other()) return;  // the child never registered its copies
  try {
    const cuda::cuda_context_scope scope(*ctx_);
    if (const cuda::cu_result r = drv_->fn().cuMemHostUnregister(s.base); r != 0)
      log().error("cuda_gpu_mapper::unmap: cuMemHostUnregister of {} failed: {}", segment_text(s),
                  drv_->result_text(r));
  } catch (const std::exception& e) {
    log().error("cuda_gpu_mapper::unmap: {}", e.what());
  }
}

std::string cuda_gpu_mapper::describe() const {
  if (creator_.is_other())
    return "a forked child of the process that initialized CUDA (driver " +
           drv_->resolved_path() + "): segments are host memory only";
  return reason_ + " (CUDA driver " + drv_->resolved_path() + ")";
}

}  // namespace umem::alloc
