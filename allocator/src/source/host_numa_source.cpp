#include "umem/allocator/source/host_numa_source.hpp"

#include <numaif.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>

#include "umem/allocator/source/os_memory.hpp"
#include "umem/allocator/placement.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/numa/node_meminfo.hpp"
#include "umem/core/detail/log.hpp"

namespace umem::alloc {
namespace {

unsigned mbind_flags(bind_mode m) {
  // STRICT makes mbind fail rather than leave pages elsewhere; on a fresh range there are none,
  // so MOVE only matters if the range was somehow touched already.
  return m == bind_mode::bind ? MPOL_MF_STRICT | MPOL_MF_MOVE : 0u;
}

// munmap for cleanup paths that must not throw: a failure is logged with the call and errno.
void release(void* base, std::size_t size) noexcept {
  try {
    os::unmap(base, size);
  } catch (const error& e) {
    log().error("host NUMA source: {}", e.what());
  }
}

// Maps `size` bytes aligned to `align` by over-mapping and trimming the edges: usable memory, or
// only address space (PROT_NONE, for a growable segment's reservation).
void* map_aligned(std::size_t size, std::size_t align, bool address_space_only) {
  auto* raw = static_cast<unsigned char*>(address_space_only
                                              ? os::reserve_address_space(size + align)
                                              : os::map_anonymous(size + align));
  const auto addr = reinterpret_cast<std::uintptr_t>(raw);
  const std::size_t head = (align - addr % align) % align;
  const std::size_t tail = align - head;
  try {
    if (head != 0) os::unmap(raw, head);
    if (tail != 0) os::unmap(raw + head + size, tail);
  } catch (...) {
    // Unmapping part of a fresh mapping does not fail in practice; if it does, give it all back.
    release(raw, size + align);
    throw;
  }
  return raw + head;
}

// Runs `step`; if it throws, runs `undo` (what undo raises is logged, not thrown) and rethrows
// the step's error, so a half-done step leaves its range as it was.
template <class Step, class Undo>
void undone_on_failure(Step&& step, Undo&& undo) {
  try {
    step();
  } catch (...) {
    try {
      undo();
    } catch (const std::exception& e) {
      log().error("host NUMA source: {}", e.what());
    }
    throw;
  }
}

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

std::size_t rounded(std::size_t bytes) {
  constexpr std::size_t g = host_numa_source::granularity;
  if (bytes > size_max - 2 * g)
    throw_error(errc::invalid_argument, "host NUMA source: size " + std::to_string(bytes) +
                                            " overflows when rounded up to 2 MiB");
  return (bytes + g - 1) / g * g;
}

// The segment's mapping inside a reservation of `reserve` bytes, or of less where that is refused.
// A reservation is only address space, yet RLIMIT_AS (`ulimit -v`, which some batch systems set)
// counts it, and valgrind cannot place one of 256 GiB (the pool's default): halving it down to a
// plain segment costs a limited process room to grow in place, never the allocation. `reserve`
// becomes what was reserved; the plain mapping's own error is the one thrown.
void* reserve_growable(std::size_t size, std::size_t& reserve) {
  while (reserve > size) {
    try {
      return map_aligned(reserve, host_numa_source::granularity, true);
    } catch (const error& e) {
      log().debug("host NUMA source: a reservation of {} bytes was refused ({}); trying half",
                  reserve, e.what());
      reserve = std::max(size, rounded(reserve / 2));
    }
  }
  return map_aligned(size, host_numa_source::granularity, false);
}

}  // namespace

host_numa_source::host_numa_source(host_source_config config)
    : config_(config), nodes_(os::allowed_nodes()) {}

void host_numa_source::check_binding(const node_binding& where) const {
  if (where.nodes.empty())
    throw_error(errc::invalid_argument, "host NUMA source: the binding has no node");
  if (where.mode == bind_mode::preferred && where.nodes.size() != 1)
    throw_error(errc::invalid_argument,
                "host NUMA source: preferred takes exactly one node, got {" +
                    format_node_set(where.nodes) + "}");
  for (int n : where.nodes)
    if (!std::binary_search(nodes_.begin(), nodes_.end(), n))
      throw_error(errc::invalid_argument,
                  "host NUMA source: NUMA node " + std::to_string(n) +
                      " does not exist on this machine (or this process may not use it); "
                      "nodes that exist: " +
                      format_node_set(nodes_));
}

segment host_numa_source::allocate(std::size_t bytes, const node_binding& where, coherence kind) {
  return allocate_growable(bytes, 0, where, kind);
}

segment host_numa_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                            const node_binding& where, coherence kind) {
  if (bytes == 0) throw_error(errc::invalid_argument, "host NUMA source: size 0 requested");
  const std::size_t size = rounded(bytes);
  std::size_t reserve = std::max(size, rounded(reserve_bytes));
  check_binding(where);

  void* base = reserve_growable(size, reserve);
  const bool growable = reserve > size;
  segment s{base, size, where, kind, config_.huge_pages, growable ? reserve : 0};
  try {
    if (growable) os::commit_fixed(base, size);
    set_up(base, size, s);
  } catch (...) {
    release(base, reserve);
    throw;
  }
  log().debug("host NUMA source: {} bytes at {} ({} {{{}}}, populate={}, reserved {})", size,
              base, to_string(where.mode), format_node_set(where.nodes),
              to_string(config_.populate), reserve);
  return s;
}

bool host_numa_source::decommit(const segment& s, void* p, std::size_t bytes) {
  (void)s;
  os::discard(p, bytes);  // the mbind policy and MADV_HUGEPAGE belong to the mapping: they stay
  return true;
}

// Given-back pages come back on touch: their binding and advice stayed with the mapping. What
// set_up() does for fresh memory still applies to them: the room check (Note [The real end of a
// node]) and the population.
// A population that fails part-way gives back what it backed, so the range stays given back as
// the contract says (segment.hpp).
void host_numa_source::recommit(const segment& s, void* p, std::size_t bytes) {
  if (s.binding.mode == bind_mode::bind) check_room(bytes, s.binding);
  undone_on_failure([&] { populate(p, bytes, s.binding); }, [&] { os::discard(p, bytes); });
}

bool host_numa_source::grow(segment& s, std::size_t extra_bytes) {
  if (s.reserved_size <= s.size) return false;
  const std::size_t extra = rounded(extra_bytes);
  if (extra > s.reserved_size - s.size) return false;
  if (extra == 0) return true;
  void* at = static_cast<unsigned char*>(s.base) + s.size;
  // The same steps as for the first part (Note [Order of the calls]) on the new range only;
  // commit_fixed replaces a range an adaptor committed before and forgot.
  os::commit_fixed(at, extra);
  segment probe = s;
  undone_on_failure([&] { set_up(at, extra, probe); }, [&] { os::decommit_fixed(at, extra); });
  s.size += extra;
  log().debug("host NUMA source: grew the segment at {} by {} bytes to {}", s.base, extra, s.size);
  return true;
}

// THP advice, binding and population of [base, base + size), a range of segment `s` (step 2-4
// of Note [Order of the calls]). Clears s.huge_pages when the kernel has no THP.
void host_numa_source::set_up(void* base, std::size_t size, segment& s) const {
  try {
    os::advise(base, size, s.huge_pages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  } catch (const error& e) {
    // EINVAL: the kernel has no THP. The segment says so (huge_pages false) and so does the log.
    if (!s.huge_pages || e.code() != errc::invalid_argument) throw;
    log().warn("host NUMA source: huge pages requested but unavailable ({})", e.what());
    s.huge_pages = false;
  }
  if (s.binding.mode == bind_mode::bind) check_room(size, s.binding);
  os::bind(base, size, s.binding, mbind_flags(s.binding.mode));
  populate(base, size, s.binding);
}

// Note [The real end of a node] (node_meminfo.hpp): a strictly bound range the nodes cannot back
// is refused here, as out_of_memory the pool and the spill policy can act on, because past this
// point the kernel answers with its OOM killer instead of an error.
void host_numa_source::check_room(std::size_t size, const node_binding& where) const {
  const fs_root live("/");
  std::uint64_t room = 0;
  for (int node : where.nodes) {
    const auto n = numa::node_obtainable_bytes(live, node);
    if (!n) return;  // no meminfo (a container without sysfs): nothing to go by
    room += *n;
  }
  if (size <= room) return;
  constexpr std::uint64_t mib = 1 << 20;
  throw_error(errc::out_of_memory,
              "host NUMA source: NUMA node(s) " + format_node_set(where.nodes) + " can give " +
                  std::to_string(room / mib) + " MiB more (MemFree + half the file pages + free " +
                  "swap - the kernel's reserve, /sys/devices/system/node/node<N>/meminfo), less " +
                  "than the " + std::to_string(size / mib) +
                  " MiB asked; memory bound there past that point wakes the kernel's OOM killer " +
                  "instead of failing");
}

void host_numa_source::populate(void* base, std::size_t size, const node_binding& where) const {
  if (config_.populate == populate_mode::none) return;
  if (config_.populate == populate_mode::map_populate) {
    if (os::populate_write(base, size)) return;
    log().debug("host NUMA source: MADV_POPULATE_WRITE unsupported (Linux < 5.14); touching");
  }
  // Interleave is decided by the policy, not by the toucher. A node without CPUs (memory-only)
  // cannot host the thread; the bind policy alone then decides.
  const auto cpus = where.mode == bind_mode::interleave ? std::vector<unsigned>{}
                                                        : os::node_cpus(where.nodes.front());
  if (cpus.empty()) {
    os::touch_pages(base, size);
  } else {
    os::run_pinned(cpus, [&] { os::touch_pages(base, size); });
  }
}

void host_numa_source::deallocate(const segment& s) noexcept {
  release(s.base, std::max(s.size, s.reserved_size));
}

std::string host_numa_source::describe() const {
  std::string d = std::string("host NUMA memory (mmap+mbind, THP ") +
                  (config_.huge_pages ? "on" : "off");
  if (config_.populate != populate_mode::none) d += std::string(", populate=") + to_string(config_.populate);
  return d + ")";
}

}  // namespace umem::alloc
