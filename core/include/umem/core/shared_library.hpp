// Loading a vendor runtime at run time: the first of several candidate paths that dlopens.
// Shared by the ROCr, CUDA and HIP loaders so all report failures the same way.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>

namespace umem {

// A runtime table's entries (the X-macro tables of rocr_library.hpp, cuda_driver.hpp and
// hip_runtime.hpp): whether the loader fails without the symbol or leaves its slot null.
enum class symbol_need { required, optional };
struct runtime_symbol {
  const char* name;
  symbol_need need;
};

// The address of `s.name` in `handle` (from dlopen), or null when the library lacks it and
// `s.need` is optional. A missing required symbol throws umem::error(runtime_error): "<what>
// <path> lacks the required symbol <name>; <hint>". One function for every runtime table, so
// they all fail the same way.
void* find_symbol(void* handle, const runtime_symbol& s, const std::string& what,
                  const std::string& path, const std::string& hint);

// find_symbol into a table's typed slot (left as it is when absent); true when found.
template <class Fn>
bool resolve_symbol(void* handle, const runtime_symbol& s, Fn& slot, const std::string& what,
                    const std::string& path, const std::string& hint) {
  void* p = find_symbol(handle, s, what, path, hint);
  if (p == nullptr) return false;
  slot = reinterpret_cast<Fn>(p);  // POSIX guarantees that a dlsym result converts to it
  return true;
}

// The file ld.so mapped for `handle` (its link map), else `fallback`.
std::string mapped_path_of(void* handle, const std::string& fallback);

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

// An opened library that umem holds: dlclosed with its last owner; move-only.
class library_reference {
 public:
  explicit library_reference(opened_library lib) : lib_(std::move(lib)) {}
  library_reference(library_reference&& other) noexcept;
  library_reference& operator=(library_reference&&) = delete;
  library_reference(const library_reference&) = delete;
  library_reference& operator=(const library_reference&) = delete;
  ~library_reference();

  void* handle() const { return lib_.handle; }
  const std::string& path() const { return lib_.path; }
  const std::string& mapped_path() const { return lib_.mapped_path; }

  // resolve_symbol in this library (its mapped path in the message).
  template <class Fn>
  bool resolve(const runtime_symbol& s, Fn& slot, const std::string& what,
               const std::string& hint) const {
    return resolve_symbol(lib_.handle, s, slot, what, lib_.mapped_path, hint);
  }

 private:
  opened_library lib_;
};

}  // namespace umem
