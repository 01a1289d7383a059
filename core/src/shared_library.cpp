#include "umem/core/shared_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

namespace umem {
namespace {

// The first candidate dlopen(flags) accepts; one line per refused candidate added to `tried`.
std::optional<opened_library> open_first(std::span<const std::string> candidates, int flags,
                                         std::string& tried) {
  for (const auto& candidate : candidates) {
    dlerror();  // clear a stale message
    if (void* handle = dlopen(candidate.c_str(), flags)) {
      return opened_library{handle, candidate, mapped_path_of(handle, candidate)};
    }
    // dlerror names the file itself ("PATH: cannot open shared object file: ..."); with
    // RTLD_NOLOAD a library that is not loaded sets no message at all.
    const char* why = dlerror();
    const std::string text = why != nullptr ? why : "not loaded in this process";
    tried += "\n  " + (text.starts_with(candidate) ? text : candidate + ": " + text);
  }
  return std::nullopt;
}

}  // namespace

opened_library open_first_library(std::span<const std::string> candidates, const std::string& what,
                                  const std::string& hint) {
  std::string tried;
  if (auto opened = open_first(candidates, RTLD_NOW | RTLD_LOCAL, tried)) {
    if (!tried.empty()) log().debug("loading {} from {} after failing:{}", what, opened->path, tried);
    return *std::move(opened);
  }
  if (tried.empty()) tried = "\n  (no candidate paths)";
  throw_error(errc::runtime_unavailable, "cannot load " + what + "; tried:" + tried + "\n" + hint);
}

std::optional<opened_library> find_loaded_library(std::span<const std::string> candidates,
                                                  std::string* tried) {
  std::string lines;
  auto opened = open_first(candidates, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, lines);
  if (tried != nullptr) *tried = std::move(lines);
  return opened;
}

library_reference::library_reference(library_reference&& other) noexcept
    : lib_(std::exchange(other.lib_, opened_library{})) {}

library_reference::~library_reference() {
  if (lib_.handle != nullptr) dlclose(lib_.handle);
}

void* find_symbol(void* handle, const runtime_symbol& s, const std::string& what,
                  const std::string& path, const std::string& hint) {
  void* p = dlsym(handle, s.name);
  if (p == nullptr && s.need == symbol_need::required)
    throw_error(errc::runtime_error,
                what + " " + path + " lacks the required symbol " + s.name + "; " + hint);
  return p;
}

std::string mapped_path_of(void* handle, const std::string& fallback) {
  if (const link_map* map = nullptr; dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 &&
                                     map != nullptr && map->l_name != nullptr && *map->l_name)
    return map->l_name;
  return fallback;
}

}  // namespace umem
