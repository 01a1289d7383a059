#include "malloc_identity.hpp"

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <gnu/libc-version.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

namespace umem::bench {
namespace {

template <class Fn>
Fn* find_symbol(const char* name) {
  return std::bit_cast<Fn*>(dlsym(RTLD_DEFAULT, name));
}

std::string library_of(const char* symbol) {
  Dl_info info{};
  void* address = dlsym(RTLD_DEFAULT, symbol);
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr)
    return "(unknown library)";
  return info.dli_fname;
}

// A malloc the compiler may not elide (it may drop a malloc/free pair it can see through).
void* opaque_malloc(std::size_t bytes) {
  void* p = std::malloc(bytes);
  benchmark::DoNotOptimize(p);
  return p;
}

}  // namespace

malloc_identity identify_malloc() {
  using mallctl_fn = int(const char*, void*, std::size_t*, void*, std::size_t);
  if (auto* mallctl = find_symbol<mallctl_fn>("mallctl")) {
    auto read_allocated = [&] {
      std::uint64_t v = 0;
      std::size_t len = sizeof v;
      if (mallctl("thread.allocated", &v, &len, nullptr, 0) != 0)
        throw std::runtime_error("jemalloc: mallctl(\"thread.allocated\") failed (jemalloc built "
                                 "without statistics?)");
      return v;
    };
    const std::uint64_t before = read_allocated();
    void* p = opaque_malloc(4096);
    const std::uint64_t grew = read_allocated() - before;
    std::free(p);
    if (grew < 4096)
      throw std::runtime_error("jemalloc is loaded but malloc() does not go to it "
                               "(thread.allocated grew by " + std::to_string(grew) +
                               " bytes on malloc(4096)); preload it with LD_PRELOAD");
    const char* version = "?";
    std::size_t len = sizeof version;
    mallctl("version", &version, &len, nullptr, 0);
    return {"jemalloc", std::string("jemalloc ") + version + " (" + library_of("mallctl") +
                            "): mallctl thread.allocated grew by " + std::to_string(grew) +
                            " bytes on malloc(4096)"};
  }
  using in_heap_fn = bool(const void*);
  using version_fn = int();
  if (auto* in_heap = find_symbol<in_heap_fn>("mi_is_in_heap_region")) {
    void* p = opaque_malloc(100);
    const bool ours = in_heap(p);
    std::free(p);
    if (!ours)
      throw std::runtime_error("mimalloc is loaded but malloc() does not go to it "
                               "(mi_is_in_heap_region(malloc(100)) is false); preload it with "
                               "LD_PRELOAD");
    auto* version = find_symbol<version_fn>("mi_version");
    return {"mimalloc", "mimalloc " + (version ? std::to_string(version()) : std::string("?")) +
                            " (" + library_of("mi_is_in_heap_region") +
                            "): mi_is_in_heap_region(malloc(100)) is true"};
  }
  const std::string lib = library_of("malloc");
  if (lib.find("libc.so") == std::string::npos)
    throw std::runtime_error("malloc() comes from " + lib + ", which is not glibc, jemalloc or "
                             "mimalloc");
  return {"glibc", std::string("glibc ") + gnu_get_libc_version() + " (" + lib +
                       "): no jemalloc or mimalloc symbols in the process"};
}

}  // namespace umem::bench
