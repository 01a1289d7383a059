#include "umem/hip_runtime/hip_device_scope.hpp"

#include "umem/core/detail/log.hpp"
#include "umem/hip_runtime/hip_compat.hpp"

namespace umem::hip {

hip_device_scope::hip_device_scope(const hip_runtime& rt, int device) : rt_(rt) {
  rt_.check(rt_.fn().hipGetDevice(&previous_), "hipGetDevice");
  if (previous_ == device) return;
  rt_.check(rt_.fn().hipSetDevice(device), "hipSetDevice");
  switched_ = true;
}

hip_device_scope::~hip_device_scope() {
  if (!switched_) return;
  if (const hip_error r = rt_.fn().hipSetDevice(previous_); r != hip_compat::result::success)
    log().error("cannot restore the thread's HIP device {}: {}", previous_, rt_.result_text(r));
}

}  // namespace umem::hip
