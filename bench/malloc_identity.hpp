// Which allocator serves malloc() in this process. jemalloc and mimalloc are measured by putting
// them in front of glibc with LD_PRELOAD in a process of their own (bench/run-benchmarks.sh), so
// the glibc baseline in the main process is never touched by them. The name printed in the
// results comes from asking the allocators themselves, not from the command line:
//  - jemalloc: mallctl("thread.allocated") grows by the size of a malloc() made here;
//  - mimalloc: mi_is_in_heap_region() is true for a pointer malloc() returned;
//  - glibc: neither library is present and malloc resolves into libc.so.
#pragma once

#include <string>

namespace umem::bench {

struct malloc_identity {
  std::string name;      // "glibc", "jemalloc", "mimalloc"
  std::string evidence;  // what showed it, with the version and the library path
};

// Throws std::runtime_error when jemalloc or mimalloc is loaded but does not serve malloc (e.g.
// dlopen'd with RTLD_LOCAL), or when malloc comes from a library none of the three.
malloc_identity identify_malloc();

}  // namespace umem::bench
