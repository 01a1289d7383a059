#include "umem/allocator/detail/c_status.hpp"

namespace umem::alloc {

umem_status c_status_of(errc code) {
  switch (code) {
    case errc::invalid_argument:
    case errc::parse_error: return UMEM_ERR_INVALID_ARGUMENT;
    case errc::out_of_memory: return UMEM_ERR_OUT_OF_MEMORY;
    case errc::not_found: return UMEM_ERR_NOT_FOUND;
    case errc::runtime_unavailable:
    case errc::runtime_error: return UMEM_ERR_RUNTIME;
    case errc::unsupported: return UMEM_ERR_UNSUPPORTED;
    case errc::io_error:
    case errc::internal: return UMEM_ERR_INTERNAL;
  }
  return UMEM_ERR_INTERNAL;
}

}  // namespace umem::alloc
