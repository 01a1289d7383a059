#include "umem/allocator/detail/pool/asymmetric_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "umem/core/detail/log.hpp"

namespace umem::alloc {

namespace {

long membarrier(int command) { return syscall(SYS_membarrier, command, 0U, 0); }

}  // namespace

bool asymmetric_fence_available() {
  static const bool available = [] {
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0) return true;
    log().debug("umem: membarrier(REGISTER_PRIVATE_EXPEDITED) failed ({}); thread caches are off",
                std::strerror(errno));
    return false;
  }();
  return available;
}

void asymmetric_fence_heavy() {
  // Cannot fail once registered; a failure here would leave the order unproven, so stop.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    log().critical("umem: membarrier(PRIVATE_EXPEDITED) failed after registration: {}",
                   std::strerror(errno));
    std::terminate();
  }
}

}  // namespace umem::alloc
