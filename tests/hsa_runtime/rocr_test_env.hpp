// Helpers for the ROCr suites: scoped environment variables, the double's paths and call log,
// and a snapshot of the 4-socket MI300A rocminfo capture for the double to serve.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "support/fixtures.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/importers/rocminfo_importer.hpp"

namespace umem::test {

inline constexpr const char* kMi300aRocminfo =
    "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt";

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~scoped_env() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A fresh directory under the system temp dir, removed at scope exit.
class temp_dir {
 public:
  temp_dir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("umem_rocr_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline umem::topology import_capture(const std::filesystem::path& file) {
  return umem::importers::import_rocminfo(read_text(file), file.filename().string()).topo;
}

inline std::filesystem::path write_snapshot(const temp_dir& dir, const umem::topology& topo) {
  auto file = dir.path() / "machine.json";
  umem::save_snapshot(topo, file);
  return file;
}

// The double's call log, read through its test-only export. The double must be loaded.
inline std::string double_call_log(const char* double_path) {
  void* h = dlopen(double_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return "<double not loaded>";
  auto fn = reinterpret_cast<const char* (*)()>(dlsym(h, "umem_rocr_double_call_log"));
  std::string log = fn != nullptr ? fn() : "<no umem_rocr_double_call_log>";
  dlclose(h);
  return log;
}

// A test control of the double (umem_rocr_double_*); nullptr when the double is not loaded.
template <class Fn>
Fn double_control(const char* double_path, const char* name) {
  void* h = dlopen(double_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  auto fn = reinterpret_cast<Fn>(dlsym(h, name));
  dlclose(h);  // NOLOAD: the library stays mapped by the test's own load
  return fn;
}

inline void double_reset(const char* double_path) {
  void* h = dlopen(double_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return;
  if (auto fn = reinterpret_cast<void (*)()>(dlsym(h, "umem_rocr_double_reset"))) fn();
  dlclose(h);
}

}  // namespace umem::test
