// Loading a vendor runtime at run time: the first of several candidate paths that dlopens.
// Shared by the ROCr and CUDA loaders so both report failures the same way.
#pragma once

#include <span>
#include <string>

namespace umem {

struct opened_library {
  void* handle = nullptr;  // from dlopen(RTLD_NOW | RTLD_LOCAL); the caller dlcloses it
  std::string path;        // the candidate that loaded, as given
};

// Tries `candidates` in order. Throws umem::error(runtime_unavailable): "cannot load <what>;
// tried:" with every candidate and dlerror's reason, then `hint` (what the user can do).
opened_library open_first_library(std::span<const std::string> candidates, const std::string& what,
                                  const std::string& hint);

}  // namespace umem
