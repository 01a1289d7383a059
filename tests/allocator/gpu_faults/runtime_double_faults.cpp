#include "runtime_double_faults.hpp"

#include <dlfcn.h>

#include <stdexcept>

namespace umem::test::gpu_faults {

void* runtime_double_faults::symbol(const std::string& name) const {
  // NOLOAD: the double stays loaded by the runtime load the test made.
  void* h = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) throw std::runtime_error(path_ + " is not loaded");
  void* fn = dlsym(h, name.c_str());
  dlclose(h);
  if (fn == nullptr) throw std::runtime_error(path_ + " has no control " + name);
  return fn;
}

}  // namespace umem::test::gpu_faults
