#include "umem/allocator/gpu/cuda_gpu_mapper.hpp"

#include <cstdint>
#include <memory>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"

namespace umem::alloc {
namespace {

namespace cc = cuda::cuda_compat;
constexpr unsigned kRegisterFlags = cc::host_register::portable | cc::host_register::devicemap;

std::vector<const agent*> cuda_gpus(const topology& topo) {
  std::vector<const agent*> out;
  for (const agent* g : topo.gpus())
    if (g->cuda) out.push_back(g);
  return out;
}

std::string gpu_text(const agent& g) {
  return "CUDA device " + std::to_string(g.cuda->ordinal) + " (" + g.marketing_name + ")";
}

// cuMemHostRegister of [p, p + n) in `ctx`, checked: the device address must be `p`. `own`: a
// fresh segment of umem's; otherwise someone else's memory (Note [Foreign registrations]), where a
// refusal is unsupported: already registered by someone else, or pages the driver cannot pin.
// Throws; leaves nothing registered on failure.
void register_range(const cuda::cuda_driver& drv, const cuda::cuda_primary_context& ctx, void* p,
                    std::size_t n, bool own) {
  const cuda::cuda_context_scope scope(ctx);
  const auto& fn = drv.fn();
  if (const cuda::cu_result r = fn.cuMemHostRegister_v2(p, n, kRegisterFlags); r != 0) {
    const bool oom = r == cc::result::out_of_memory;
    const bool refused = !own && (r == cc::result::invalid_value ||
                                  r == cc::result::host_memory_already_registered);
    throw_error(oom ? errc::out_of_memory : refused ? errc::unsupported : errc::runtime_error,
                "cuda_gpu_mapper: cannot make " + detail::range_text(p, n) +
                    " GPU-accessible: cuMemHostRegister failed: " + drv.result_text(r) +
                    (r == cc::result::host_memory_already_registered
                         ? " (someone else registered some of its pages)"
                     : refused ? " (the driver pins only writable memory that is wholly mapped and "
                                 "not a shared map of a file outside tmpfs)"
                               : ""));
  }
  cuda::cu_deviceptr device = 0;
  const cuda::cu_result r = fn.cuMemHostGetDevicePointer_v2(&device, p, 0);
  if (r == 0 && device == reinterpret_cast<std::uintptr_t>(p)) return;
  const cuda::cu_result undo = fn.cuMemHostUnregister(p);
  const std::string undone =
      undo == 0 ? "The registration was undone." : "It was not undone: " + drv.result_text(undo);
  if (r != 0)
    throw_error(errc::runtime_error, "cuda_gpu_mapper: cuMemHostGetDevicePointer failed for " +
                                         detail::range_text(p, n) + ": " + drv.result_text(r) +
                                         ". " + undone);
  throw_error(errc::unsupported,
              "cuda_gpu_mapper: the driver mapped " + detail::range_text(p, n) +
                  " at device address " + detail::hex(device) +
                  ", not at its host address; zero-copy sharing needs one address for CPU and "
                  "GPU (CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM). " + undone);
}

void unregister_range(const cuda::cuda_driver& drv, const cuda::cuda_primary_context& ctx,
                      void* p, std::size_t n) noexcept {
  try {
    const cuda::cuda_context_scope scope(ctx);
    if (const cuda::cu_result r = drv.fn().cuMemHostUnregister(p); r != 0)
      log().error("cuda_gpu_mapper: cuMemHostUnregister of {} failed: {}", detail::range_text(p, n),
                  drv.result_text(r));
  } catch (const std::exception& e) {
    log().error("cuda_gpu_mapper: unregistering {}: {}", detail::range_text(p, n), e.what());
  }
}

// Whether the driver knows `p` as registered or pinned host memory (a device pointer for it).
bool driver_knows(const cuda::cuda_driver& drv, const cuda::cuda_primary_context& ctx,
                  const void* p) noexcept {
  try {
    const cuda::cuda_context_scope scope(ctx);
    cuda::cu_deviceptr device = 0;
    return drv.fn().cuMemHostGetDevicePointer_v2(&device, const_cast<void*>(p), 0) == 0;
  } catch (const std::exception&) {
    return false;
  }
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
  // In a forked child the context is left as it is: releasing it is a driver call (Note [Fork]).
  ctx_ = std::shared_ptr<cuda::cuda_primary_context>(
      new cuda::cuda_primary_context(*drv_, static_cast<int>(gpus.front()->cuda->ordinal)),
      [creator = creating_process()](cuda::cuda_primary_context* c) {
        if (!creator.is_other()) delete c;
      });
  // The calls hold the driver and the context: handles may outlive this mapper.
  foreign_ = std::make_shared<foreign_registrations>(foreign_registrations::runtime{
      "cuda_gpu_mapper",
      [drv = drv_, ctx = ctx_](const void* p) { return driver_knows(*drv, *ctx, p); },
      [drv = drv_, ctx = ctx_](void* p, std::size_t n) {
        register_range(*drv, *ctx, p, n, /*own=*/false);
      },
      [drv = drv_, ctx = ctx_](void* p, std::size_t n) { unregister_range(*drv, *ctx, p, n); }});
  reason_ = "no PAGEABLE_MEMORY_ACCESS: segments are registered with cuMemHostRegister "
            "(PORTABLE|DEVICEMAP) for every CUDA GPU at their host address";
  log().debug("cuda_gpu_mapper: {}", describe());
}

cuda_gpu_mapper::~cuda_gpu_mapper() = default;

void cuda_gpu_mapper::map(const segment& s) {
  if (s.base == nullptr || s.size == 0)
    throw_error(errc::invalid_argument, "cuda_gpu_mapper: a segment needs a base and a size (got " +
                                            detail::range_text(s.base, s.size) + ")");
  if (!ctx_ || creator_.is_other()) return;  // Note [Fork]: host memory only in a forked child
  register_range(*drv_, *ctx_, s.base, s.size, /*own=*/true);
}

void cuda_gpu_mapper::unmap(const segment& s) noexcept {
  if (!ctx_ || creator_.is_other()) return;  // the child never registered its copies
  unregister_range(*drv_, *ctx_, s.base, s.size);
}

std::shared_ptr<void> cuda_gpu_mapper::register_foreign(const void* p, std::size_t bytes) {
  if (!foreign_) return nullptr;  // pageable mode: the GPU and CUDA's calls use it as it is
  return foreign_->acquire(p, bytes);  // Note [Foreign registrations]
}

std::string cuda_gpu_mapper::describe() const {
  if (creator_.is_other())
    return "a forked child of the process that initialized CUDA (driver " +
           drv_->resolved_path() + "): segments are host memory only";
  return reason_ + " (CUDA driver " + drv_->resolved_path() + ")";
}

}  // namespace umem::alloc
