// The C boundary shared by every C entry point (umem.h, umem_torch.h): a umem error code's
// status, and running C++ code so that no exception crosses into C. A failure maps to the same
// status and message whichever library reports it.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "umem/core/error.hpp"
#include "umem/umem.h"

namespace umem::alloc {

umem_status c_status_of(errc code);

// Runs `body`; on an exception returns `fail(status, message)` (which records the message for
// the caller's last-error function), else UMEM_OK.
template <typename Body, typename Fail>
umem_status run_at_c_boundary(Body&& body, Fail&& fail) {
  try {
    body();
    return UMEM_OK;
  } catch (const error& e) {
    return fail(c_status_of(e.code()), std::string(e.what()));
  } catch (const std::bad_alloc&) {
    return fail(UMEM_ERR_OUT_OF_MEMORY, std::string("out of host memory for umem's own bookkeeping"));
  } catch (const std::exception& e) {
    return fail(UMEM_ERR_INTERNAL, std::string(e.what()));
  } catch (...) {
    return fail(UMEM_ERR_INTERNAL, std::string("unknown exception"));
  }
}

}  // namespace umem::alloc
