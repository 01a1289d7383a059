// The C ABI's status for a umem error code; shared by every C entry point (umem.h, umem_torch.h)
// so a failure maps to the same status whichever library reports it.
#pragma once

#include "umem/core/error.hpp"
#include "umem/umem.h"

namespace umem::alloc {

umem_status c_status_of(errc code);

}  // namespace umem::alloc
