// Loading a vendor runtime at run time: the first of several candidate paths that dlopens.
// Shared by the ROCr, CUDA and HIP loaders so all report failures the same way.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace umem {

struct opened_library {
  void* handle = nullptr;  // from dlopen(RTLD_NOW | RTLD_LOCAL); the caller dlcloses it
  std::string path;        // the candidate that loaded, as given
  std::string mapped_path; // the file ld.so mapped for it (its link map), else `path`
};

// Tries `candidates` in order. Throws umem::error(runtime_unavailable): "cannot load <what>;
// tried:" with every candidate and dlerror's reason, then `hint` (what the user can do).
opened_library open_first_library(std::span<const std::string> candidates, const std::string& what,
                                  const std::string& hint);

// The first of `candidates` that is already mapped into this process (dlopen with RTLD_NOLOAD:
// it never maps a file, so a runtime umem must not bring into a process stays out), with a
// reference of its own for the caller to dlclose; nullopt when none is loaded, which is a state,
// not an error. `tried` (may be null) gets one line per candidate that was not loaded.
std::optional<opened_library> find_loaded_library(std::span<const std::string> candidates,
                                                  std::string* tried = nullptr);

}  // namespace umem
