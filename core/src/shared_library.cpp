#include "umem/core/shared_library.hpp"

#include <dlfcn.h>

#include "umem/core/error.hpp"
#include "umem/core/log.hpp"

namespace umem {

opened_library open_first_library(std::span<const std::string> candidates, const std::string& what,
                                  const std::string& hint) {
  std::string tried;
  for (const auto& candidate : candidates) {
    dlerror();  // clear a stale message
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      if (!tried.empty()) log().debug("loading {} from {} after failing:{}", what, candidate, tried);
      return {handle, candidate};
    }
    // dlerror names the file itself ("PATH: cannot open shared object file: ...").
    const char* why = dlerror();
    const std::string text = why != nullptr ? why : "dlopen failed";
    tried += "\n  " + (text.starts_with(candidate) ? text : candidate + ": " + text);
  }
  if (tried.empty()) tried = "\n  (no candidate paths)";
  throw_error(errc::runtime_unavailable, "cannot load " + what + "; tried:" + tried + "\n" + hint);
}

}  // namespace umem
