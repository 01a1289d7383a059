#include "umem/torch_bridge/torch_error.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <typeinfo>

namespace umem::torch_bridge {
namespace {

// c10::SourceLocation, passed by value to c10::Error's constructor.
struct c10_source_location {
  const char* function;
  const char* file;
  std::uint32_t line;
};
// c10::Error::Error(SourceLocation, std::string), called as a function taking `this` first
// (the Itanium ABI of a constructor).
using error_ctor = void (*)(void* self, c10_source_location where, std::string msg);

struct c10_symbols {
  error_ctor ctor = nullptr;
  std::type_info* error_type = nullptr;
  std::type_info* oom_type = nullptr;
};

int find_torch_python(dl_phdr_info* info, std::size_t, void* out) {
  const char* name = info->dlpi_name;
  const char* base = std::strrchr(name, '/');
  base = base == nullptr ? name : base + 1;
  if (std::strncmp(base, "libtorch_python.so", 18) != 0) return 0;
  *static_cast<std::string*>(out) = name;
  return 1;
}

c10_symbols load_symbols() {
  c10_symbols s;
  std::string path;
  dl_iterate_phdr(find_torch_python, &path);
  if (path.empty()) return s;
  // RTLD_NOLOAD: only a handle on what PyTorch already loaded (its dependencies are searched too).
  void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return s;
  s.ctor = reinterpret_cast<error_ctor>(dlsym(
      h, "_ZN3c105ErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"));
  s.error_type = static_cast<std::type_info*>(dlsym(h, "_ZTIN3c105ErrorE"));
  s.oom_type = static_cast<std::type_info*>(dlsym(h, "_ZTIN3c1016OutOfMemoryErrorE"));
  return s;  // the handle stays open: the symbols are used for the process's lifetime
}

// Runs the object's complete-object destructor through its vtable (slot 0 of a class whose first
// virtual function is its destructor, as c10::Error's is).
void destroy_c10_error(void* obj) {
  using dtor = void (*)(void*);
  dtor* vtable = *static_cast<dtor**>(obj);
  vtable[0](obj);
}

// Generous: c10::Error is a few strings, a vector and pointers (under 256 bytes in 1.13-2.x).
constexpr std::size_t c10_error_storage = 1024;

}  // namespace

void throw_torch_error(bool out_of_memory, const std::string& message) {
  static std::once_flag once;
  static c10_symbols syms;
  std::call_once(once, [] { syms = load_symbols(); });
  std::type_info* type = out_of_memory && syms.oom_type != nullptr ? syms.oom_type : syms.error_type;
  if (syms.ctor == nullptr || type == nullptr) throw std::runtime_error(message);
  void* obj = abi::__cxa_allocate_exception(c10_error_storage);
  std::memset(obj, 0, c10_error_storage);
  syms.ctor(obj, c10_source_location{"umem_torch_malloc", __FILE__, __LINE__}, message);
  abi::__cxa_throw(obj, type, destroy_c10_error);
}

}  // namespace umem::torch_bridge
