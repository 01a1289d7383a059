/* The C ABI through dlopen, as a plugin host (e.g. PyTorch's pluggable allocator) uses it. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "umem/umem.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBUMEM\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  void* (*alloc)(size_t) = (void* (*)(size_t))dlsym(lib, "umem_alloc");
  umem_status (*release)(void*) = (umem_status(*)(void*))dlsym(lib, "umem_free");
  const char* (*last_error)(void) = (const char* (*)(void))dlsym(lib, "umem_last_error");
  if (!alloc || !release || !last_error) {
    fprintf(stderr, "missing symbol: %s\n", dlerror());
    return 1;
  }
  char* p = alloc(12345);
  if (!p) {
    fprintf(stderr, "umem_alloc failed: %s\n", last_error());
    return 1;
  }
  memset(p, 1, 12345);
  if (release(p) != UMEM_OK || release(p) != UMEM_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "free / double free not as expected: %s\n", last_error());
    return 1;
  }
  printf("dlopen: ok (double free reported: %s)\n", last_error());
  return 0;
}
