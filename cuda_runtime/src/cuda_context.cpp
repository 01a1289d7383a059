#include "umem/cuda_runtime/cuda_context.hpp"

#include "umem/core/detail/log.hpp"

namespace umem::cuda {

cuda_primary_context::cuda_primary_context(const cuda_driver& drv, int ordinal)
    : drv_(drv), ordinal_(ordinal) {
  drv_.check(drv_.fn().cuDeviceGet(&dev_, ordinal), "cuDeviceGet");
  drv_.check(drv_.fn().cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
}

cuda_primary_context::~cuda_primary_context() {
  if (const cu_result r = drv_.fn().cuDevicePrimaryCtxRelease_v2(dev_); r != 0)
    log().debug("cuDevicePrimaryCtxRelease({}): {}", ordinal_, drv_.result_text(r));
}

cuda_context_scope::cuda_context_scope(const cuda_primary_context& ctx) : drv_(ctx.driver()) {
  drv_.check(drv_.fn().cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ == ctx.get()) return;
  drv_.check(drv_.fn().cuCtxSetCurrent(ctx.get()), "cuCtxSetCurrent");
  switched_ = true;
}

cuda_context_scope::~cuda_context_scope() {
  if (!switched_) return;
  if (const cu_result r = drv_.fn().cuCtxSetCurrent(previous_); r != 0)
    log().error("cannot restore the thread's CUDA context: {}", drv_.result_text(r));
}

}  // namespace umem::cuda
