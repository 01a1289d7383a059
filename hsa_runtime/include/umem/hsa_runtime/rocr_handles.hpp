// The runtime's handles in its own order: every agent, every memory pool of an agent. The one
// place for the hsa_*_iterate_* callback, which must not let an exception unwind through the
// runtime's C frames.
#pragma once

#include <vector>

#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::hsa {

// For hsa_*_iterate_*: appends each handle to the std::vector<Handle> at `out`.
template <class Handle>
rocr_status collect_handle(Handle h, void* out) {
  try {
    static_cast<std::vector<Handle>*>(out)->push_back(h);
    return rocr_compat::status::success;
  } catch (...) {
    return rocr_compat::status::error;
  }
}

// Throw what rocr_library::check throws when the iteration fails.
std::vector<rocr_agent> agents_of(const rocr_library& lib);
std::vector<rocr_pool> pools_of(const rocr_library& lib, rocr_agent agent);

}  // namespace umem::hsa
