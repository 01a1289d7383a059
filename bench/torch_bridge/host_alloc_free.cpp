// umem-torch-host-alloc-free: SIZE bytes allocated and freed ITERATIONS times through the torch
// bridge's C ABI for CPU tensors (umem_torch_host_malloc / umem_torch_host_free, the calls of
// umem's CPU allocator extension, torch_bridge/extension/umem_cpu_allocator.cpp), after 1000 of
// the same untimed. No clock: bench/torch_bridge/host-instructions-per-op.sh runs it under
// callgrind with ITERATIONS 0 and N and divides the difference, so that the count is the bridge's
// whole path (statistics, live-block table, allocator) and nothing of the process's start.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "umem/umem_torch.h"

namespace {

// A positive decimal number, or 0 where `text` is none.
unsigned long long count_of(const char* text) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text, &end, 10);
  return end != text && *end == '\0' && text[0] != '-' ? n : 0;
}

bool alloc_free(std::size_t size) {
  void* p = nullptr;
  if (umem_torch_host_malloc(size, -1, &p) != UMEM_OK) return false;
  return umem_torch_host_free(p) == UMEM_OK;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SIZE ITERATIONS\n", argv[0]);
    return 2;
  }
  const std::size_t size = count_of(argv[1]);
  const unsigned long long iterations = count_of(argv[2]);
  if (size == 0 || (iterations == 0 && std::string_view(argv[2]) != "0")) {
    std::fprintf(stderr, "umem-torch-host-alloc-free: SIZE must be a positive number of bytes and "
                         "ITERATIONS a number (got '%s' '%s')\n", argv[1], argv[2]);
    return 2;
  }
  for (int i = 0; i < 1000; ++i)
    if (!alloc_free(size)) {
      std::fprintf(stderr, "umem-torch-host-alloc-free: %s\n", umem_last_error());
      return 1;
    }
  for (unsigned long long i = 0; i < iterations; ++i) alloc_free(size);
  return 0;
}
