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

  // The address of `name`, or null when the library lacks it and `required` is false. A missing
  // required symbol throws umem::error(runtime_error): "<what> <mapped path> lacks the required
  // symbol <name>; <hint>".
  void* symbol(const char* name, bool required, const std::string& what,
               const std::string& hint) const;

 private:
  opened_library lib_;
};

}  // namespace umem
