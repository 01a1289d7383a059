#include "umem/allocator/cuda_device_source.hpp"

#include <cstdint>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"

namespace umem::alloc {
namespace {

namespace cc = cuda::cuda_compat;

int ordinal_of(const agent& gpu) {
  if (!gpu.cuda)
    throw_error(errc::invalid_argument, "cuda_device_source: " + gpu.marketing_name +
                                            " is not a GPU discovered through the CUDA driver");
  return static_cast<int>(gpu.cuda->ordinal);
}

}  // namespace

cuda_device_source::cuda_device_source(std::shared_ptr<const cuda::cuda_driver> drv,
                                       const agent& gpu)
    : drv_(std::move(drv)),
      ctx_(*drv_, ordinal_of(gpu)),
      name_("CUDA device " + std::to_string(gpu.cuda->ordinal) + " (" + gpu.marketing_name +
            ")") {}

segment cuda_device_source::allocate(std::size_t bytes, const node_binding& where,
                                     coherence kind) {
  if (bytes == 0 || bytes > SIZE_MAX - (granularity - 1))
    throw_error(errc::invalid_argument, "cuda_device_source: cannot allocate " +
                                            std::to_string(bytes) + " bytes on " + name_);
  const std::size_t rounded = (bytes + granularity - 1) & ~(granularity - 1);
  const cuda::cuda_context_scope scope(ctx_);
  cuda::cu_deviceptr p = 0;
  const cuda::cu_result r = drv_->fn().cuMemAlloc_v2(&p, rounded);
  if (r == cc::result::out_of_memory) {
    std::size_t free_bytes = 0, total = 0;
    const cuda::cu_result info = drv_->fn().cuMemGetInfo_v2(&free_bytes, &total);
    throw_error(errc::out_of_memory,
                "cuda_device_source: " + name_ + " has no room for " + std::to_string(rounded) +
                    " bytes: cuMemAlloc failed: " + drv_->result_text(r) + "; " +
                    (info == 0 ? "cuMemGetInfo: " + std::to_string(free_bytes) + " of " +
                                     std::to_string(total) + " bytes free"
                               : "cuMemGetInfo failed too: " + drv_->result_text(info)));
  }
  if (r != 0)
    throw_error(errc::runtime_error, "cuda_device_source: cuMemAlloc of " +
                                         std::to_string(rounded) + " bytes on " + name_ +
                                         " failed: " + drv_->result_text(r));
  segment s;
  s.base = reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
  s.size = rounded;
  s.binding = where;
  s.kind = kind;
  return s;
}

void cuda_device_source::deallocate(const segment& s) noexcept {
  try {
    const cuda::cuda_context_scope scope(ctx_);
    const auto p = static_cast<cuda::cu_deviceptr>(reinterpret_cast<std::uintptr_t>(s.base));
    if (const cuda::cu_result r = drv_->fn().cuMemFree_v2(p); r != 0)
      log().error("cuda_device_source: cuMemFree of {} bytes at {} on {} failed: {}", s.size,
                  s.base, name_, drv_->result_text(r));
  } catch (const std::exception& e) {
    log().error("cuda_device_source::deallocate on {}: {}", name_, e.what());
  }
}

std::string cuda_device_source::describe() const {
  return name_ + " memory: cuMemAlloc in its primary context, 2 MiB segments (CUDA driver " +
         drv_->resolved_path() + ")";
}

std::pair<std::uint64_t, std::uint64_t> cuda_device_source::memory_info() const {
  const cuda::cuda_context_scope scope(ctx_);
  std::size_t free_bytes = 0, total = 0;
  drv_->check(drv_->fn().cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  return {free_bytes, total};
}

}  // namespace umem::alloc
