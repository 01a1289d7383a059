#include "reserving_source.hpp"

#include <sys/mman.h>

#include <cerrno>

#include "umem/core/error.hpp"
#include "umem/core/log.hpp"

namespace umem::trace_replay {

alloc::segment reserving_source::allocate(std::size_t bytes, const alloc::node_binding& where,
                                          coherence kind) {
  if (bytes == 0) throw_error(errc::invalid_argument, "reserving_source: allocate(0)");
  if (bytes > SIZE_MAX - granularity)
    throw_error(errc::invalid_argument,
                "reserving_source: " + std::to_string(bytes) + " bytes overflow when rounded");
  const std::size_t size = (bytes + granularity - 1) / granularity * granularity;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw_errno(errc::out_of_memory,
                "reserving_source: mmap of " + std::to_string(size) + " bytes of address space",
                errno);
  // Without this a THP-"always" kernel backs 2 MiB for every touched pattern word.
  if (madvise(p, size, MADV_NOHUGEPAGE) != 0)
    log().debug("reserving_source: madvise(MADV_NOHUGEPAGE) failed: errno {}", errno);
  outstanding_ += size;
  return alloc::segment{p, size, where, kind, false};
}

void reserving_source::deallocate(const alloc::segment& s) noexcept {
  if (munmap(s.base, s.size) != 0) {
    log().warn("reserving_source: munmap({}, {}) failed: errno {}", s.base, s.size, errno);
    return;
  }
  outstanding_ -= s.size;
}

std::string reserving_source::describe() const {
  return "reserved address space (mmap MAP_NORESERVE, no THP; only touched pages backed)";
}

}  // namespace umem::trace_replay
