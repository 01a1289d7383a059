#include "reserving_source.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

namespace umem::trace_replay {
namespace {

std::size_t rounded(std::size_t bytes) {
  constexpr std::size_t g = reserving_source::granularity;
  if (bytes > SIZE_MAX - g)
    throw_error(errc::invalid_argument,
                "reserving_source: " + std::to_string(bytes) + " bytes overflow when rounded");
  return (bytes + g - 1) / g * g;
}

}  // namespace

alloc::segment reserving_source::allocate(std::size_t bytes, const alloc::node_binding& where,
                                          coherence kind) {
  return allocate_growable(bytes, 0, where, kind);
}

alloc::segment reserving_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                                   const alloc::node_binding& where,
                                                   coherence kind) {
  if (bytes == 0) throw_error(errc::invalid_argument, "reserving_source: allocate(0)");
  const std::size_t size = rounded(bytes);
  const std::size_t reserve = std::max(size, rounded(reserve_bytes));
  const bool growable = reserve > size;
  void* p = mmap(nullptr, reserve, growable ? PROT_NONE : PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw_errno(errc::out_of_memory,
                "reserving_source: mmap of " + std::to_string(reserve) + " bytes of address space",
                errno);
  // Without this a THP-"always" kernel backs 2 MiB for every touched pattern word.
  if (madvise(p, reserve, MADV_NOHUGEPAGE) != 0)
    log().debug("reserving_source: madvise(MADV_NOHUGEPAGE) failed: errno {}", errno);
  if (growable && mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
    const int err = errno;
    munmap(p, reserve);
    throw_errno(errc::out_of_memory,
                "reserving_source: mprotect of the first " + std::to_string(size) + " bytes",
                err);
  }
  outstanding_ += size;
  return alloc::segment{p, size, where, kind, false, growable ? reserve : 0};
}

bool reserving_source::grow(alloc::segment& s, std::size_t extra_bytes) {
  if (s.reserved_size <= s.size) return false;
  const std::size_t extra = rounded(extra_bytes);
  if (extra > s.reserved_size - s.size) return false;
  if (mprotect(static_cast<char*>(s.base) + s.size, extra, PROT_READ | PROT_WRITE) != 0)
    throw_errno(errc::out_of_memory,
                "reserving_source: mprotect of " + std::to_string(extra) + " more bytes", errno);
  s.size += extra;
  outstanding_ += extra;
  return true;
}

bool reserving_source::decommit(const alloc::segment& s, void* p, std::size_t bytes) {
  (void)s;
  if (madvise(p, bytes, MADV_DONTNEED) != 0)
    throw_errno(errc::runtime_error, "reserving_source: madvise(MADV_DONTNEED)", errno);
  return true;
}

void reserving_source::deallocate(const alloc::segment& s) noexcept {
  if (munmap(s.base, std::max(s.size, s.reserved_size)) != 0) {
    log().warn("reserving_source: munmap({}, {}) failed: errno {}", s.base, s.size, errno);
    return;
  }
  outstanding_ -= s.size;
}

std::string reserving_source::describe() const {
  return "reserved address space (mmap MAP_NORESERVE, no THP; only touched pages backed)";
}

}  // namespace umem::trace_replay
