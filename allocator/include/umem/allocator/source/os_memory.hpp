// The thin primitive layer under the allocator: one function per OS call it needs (mmap, mbind,
// madvise, move_pages, get_mempolicy, getcpu, CPU affinity, /proc/self/pagemap). Nothing here
// decides policy; upper layers (host_numa_source, residency) compose these calls.
//
// Every failure throws umem::error carrying the call, its arguments and strerror:
// ENOMEM -> errc::out_of_memory, EINVAL/EFAULT/ESRCH/EPERM -> invalid_argument,
// ENOSYS/EOPNOTSUPP -> unsupported, anything else -> internal.
// All functions are thread-safe (they keep no state of their own).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/placement.hpp"

namespace umem::alloc::os {

// The base page size (sysconf(_SC_PAGESIZE)).
std::size_t page_size();

// mmap(PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS): reserves address space, backs nothing.
void* map_anonymous(std::size_t bytes);
void unmap(void* p, std::size_t bytes);

// mmap(PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE): address space only, never backed
// and not charged to the commit limit, for growable segments (segment.hpp).
void* reserve_address_space(std::size_t bytes);
// mmap(p, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED) over [p, p+bytes) of a
// reservation this process owns: makes it usable exactly like map_anonymous() memory (fresh
// zero pages, default policy, charged like map_anonymous()). Replaces whatever was there.
void commit_fixed(void* p, std::size_t bytes);
// Returns [p, p+bytes) to the reserved state of reserve_address_space() (pages freed).
void decommit_fixed(void* p, std::size_t bytes);

// mbind(p, bytes) with `b`'s mode and node set; `flags` are MPOL_MF_* bits. `p` page-aligned.
void bind(void* p, std::size_t bytes, const node_binding& b, unsigned flags);

// madvise(MADV_DONTNEED): frees the pages of [p, p+bytes) (page-aligned); the mapping and its
// NUMA policy stay, and the next touch backs a page again with zeros.
void discard(void* p, std::size_t bytes);

// madvise(p, bytes, advice) for MADV_HUGEPAGE / MADV_NOHUGEPAGE.
void advise(void* p, std::size_t bytes, int advice);

// madvise(MADV_POPULATE_WRITE) (Linux 5.14+): faults every page in writable, following the
// range's NUMA policy. Returns false when the kernel does not know the advice (EINVAL), so the
// caller can fall back to touching. ENOMEM and EFAULT (the kernel could not back a page) throw
// errc::out_of_memory.
bool populate_write(void* p, std::size_t bytes);

// Writes one byte per base page from the calling thread (first touch). Contents become zero.
void touch_pages(void* p, std::size_t bytes);

// move_pages(pid 0, nodes = NULL): for each base page of [p, p+bytes) the NUMA node it is on, or
// a negative errno (-ENOENT: never touched; -EFAULT: not mapped, or, on older kernels such as
// 6.1, never touched or the shared zero page: residency.hpp, Note [Not present]).
std::vector<int> page_nodes(const void* p, std::size_t bytes);

// get_mempolicy(MPOL_F_ADDR) at `addr`: the policy of the VMA that contains it.
struct memory_policy {
  int mode = 0;            // MPOL_DEFAULT, MPOL_BIND, ... (mode flags stripped)
  std::vector<int> nodes;  // ascending
  bool operator==(const memory_policy&) const = default;
};
memory_policy policy_at(const void* addr);
// "bind", "preferred", "interleave", "default", "local", ... for a MPOL_* mode.
std::string policy_name(int mode);

// Bytes of [p, p+bytes) backed by transparent huge pages, page by page: /proc/self/pagemap gives
// each present page's frame, /proc/kpageflags bit 22 (KPF_THP) says whether it is part of a THP.
// nullopt when this is not possible (not root: pagemap hides frame numbers; no kpageflags).
std::optional<std::size_t> thp_bytes_by_page(const void* p, std::size_t bytes);

// The NUMA node of the CPU the calling thread runs on now (Note [Calling thread's node] in
// os_memory.cpp).
int current_node();

// NUMA nodes this process may allocate on (libnuma's view of Mems_allowed), ascending; {0} on a
// kernel without NUMA support (mbind then fails with errc::unsupported).
std::vector<int> allowed_nodes();

// CPUs of `node` that this process may run on, ascending; empty for a memory-only node.
std::vector<unsigned> node_cpus(int node);

// Runs `fn` on a new thread pinned to `cpus` and waits for it; rethrows what `fn` throws.
// Throws errc::invalid_argument if `cpus` is empty or the affinity cannot be set.
void run_pinned(const std::vector<unsigned>& cpus, const std::function<void()>& fn);

}  // namespace umem::alloc::os
