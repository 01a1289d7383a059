#include "umem/allocator/source/os_memory.hpp"

#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include "umem/core/error.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::alloc::os {
namespace {

errc errc_of(int err) {
  switch (err) {
    case ENOMEM: return errc::out_of_memory;
    case EINVAL:
    case EFAULT:
    case ESRCH:
    case EPERM: return errc::invalid_argument;
    case ENOSYS:
    case EOPNOTSUPP: return errc::unsupported;
    default: return errc::internal;
  }
}

[[noreturn]] void fail(const std::string& call, int err) {
  throw_errno(errc_of(err), call + " failed", err);
}

using umem::detail::hex;

int mpol_of(bind_mode m) {
  switch (m) {
    case bind_mode::bind: return MPOL_BIND;
    case bind_mode::preferred: return MPOL_PREFERRED;
    case bind_mode::interleave: return MPOL_INTERLEAVE;
  }
  return MPOL_DEFAULT;
}

std::string mf_flags_name(unsigned flags) {
  std::string s;
  const auto add = [&](unsigned bit, const char* name) {
    if (flags & bit) s += (s.empty() ? "" : "|") + std::string(name);
  };
  add(MPOL_MF_STRICT, "MPOL_MF_STRICT");
  add(MPOL_MF_MOVE, "MPOL_MF_MOVE");
  add(MPOL_MF_MOVE_ALL, "MPOL_MF_MOVE_ALL");
  return s.empty() ? "0" : s;
}

// A kernel nodemask as mbind/get_mempolicy take it: whole longs covering every possible node.
constexpr std::size_t bits_per_long = 8 * sizeof(unsigned long);
std::size_t mask_longs() {
  return (static_cast<std::size_t>(numa_num_possible_nodes()) + bits_per_long - 1) /
         bits_per_long;
}

// RAII for a file descriptor opened read-only.
class fd_reader {
 public:
  explicit fd_reader(const char* path) : fd_(::open(path, O_RDONLY | O_CLOEXEC)) {}
  ~fd_reader() {
    if (fd_ >= 0) ::close(fd_);
  }
  fd_reader(const fd_reader&) = delete;
  fd_reader& operator=(const fd_reader&) = delete;
  bool ok() const { return fd_ >= 0; }
  // Reads `count` 64-bit entries starting at entry `index`; false on a short or failed read.
  bool read(std::uint64_t index, std::uint64_t* out, std::size_t count) const {
    const auto want = static_cast<ssize_t>(count * sizeof(std::uint64_t));
    return ::pread(fd_, out, static_cast<std::size_t>(want),
                   static_cast<off_t>(index * sizeof(std::uint64_t))) == want;
  }

 private:
  int fd_;
};

}  // namespace

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

void* map_anonymous(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    fail("mmap(len=" + std::to_string(bytes) + ", PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS)",
         errno);
  return p;
}

void* reserve_address_space(std::size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail("mmap(len=" + std::to_string(bytes) +
             ", PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE)",
         errno);
  return p;
}

void commit_fixed(void* p, std::size_t bytes) {
  if (::mmap(p, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
      MAP_FAILED)
    fail("mmap(addr=" + hex(p) + ", len=" + std::to_string(bytes) +
             ", PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_FIXED)",
         errno);
}

void decommit_fixed(void* p, std::size_t bytes) {
  if (::mmap(p, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
             0) == MAP_FAILED)
    fail("mmap(addr=" + hex(p) + ", len=" + std::to_string(bytes) +
             ", PROT_NONE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE|MAP_FIXED)",
         errno);
}

void discard(void* p, std::size_t bytes) {
  if (::madvise(p, bytes, MADV_DONTNEED) != 0)
    fail("madvise(addr=" + hex(p) + ", len=" + std::to_string(bytes) + ", MADV_DONTNEED)", errno);
}

void unmap(void* p, std::size_t bytes) {
  if (::munmap(p, bytes) != 0)
    fail("munmap(addr=" + hex(p) + ", len=" + std::to_string(bytes) + ")", errno);
}

void bind(void* p, std::size_t bytes, const node_binding& b, unsigned flags) {
  const std::size_t longs = mask_longs();
  std::vector<unsigned long> mask(longs, 0);
  for (int n : b.nodes) {
    if (n < 0 || static_cast<std::size_t>(n) >= longs * bits_per_long)
      throw_error(errc::invalid_argument,
                  "mbind: NUMA node " + std::to_string(n) + " is outside the kernel's node range");
    mask[static_cast<std::size_t>(n) / bits_per_long] |= 1UL
                                                         << (static_cast<std::size_t>(n) %
                                                             bits_per_long);
  }
  // The kernel reads maxnode - 1 bits (a historical off-by-one every caller follows).
  if (::mbind(p, bytes, mpol_of(b.mode), mask.data(), longs * bits_per_long + 1, flags) != 0)
    fail("mbind(addr=" + hex(p) + ", len=" + std::to_string(bytes) +
             ", mode=" + policy_name(mpol_of(b.mode)) + ", nodes={" + umem::detail::join(b.nodes, ",") +
             "}, flags=" + mf_flags_name(flags) + ")",
         errno);
}

void advise(void* p, std::size_t bytes, int advice) {
  if (::madvise(p, bytes, advice) != 0) {
    const char* name = advice == MADV_HUGEPAGE     ? "MADV_HUGEPAGE"
                       : advice == MADV_NOHUGEPAGE ? "MADV_NOHUGEPAGE"
                                                   : nullptr;
    fail("madvise(addr=" + hex(p) + ", len=" + std::to_string(bytes) + ", " +
             (name ? std::string(name) : std::to_string(advice)) + ")",
         errno);
  }
}

bool populate_write(void* p, std::size_t bytes) {
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return true;
  const int err = errno;
  if (err == EINVAL) return false;
  const std::string call =
      "madvise(addr=" + hex(p) + ", len=" + std::to_string(bytes) + ", MADV_POPULATE_WRITE)";
  if (err == ENOMEM || err == EFAULT)
    throw_errno(errc::out_of_memory, call + " could not back the range", err);
  fail(call, err);
}

void touch_pages(void* p, std::size_t bytes) {
  auto* bytes_ptr = static_cast<volatile unsigned char*>(p);
  for (std::size_t off = 0; off < bytes; off += page_size()) bytes_ptr[off] = 0;
}

std::vector<int> page_nodes(const void* p, std::size_t bytes) {
  const std::size_t ps = page_size();
  const std::size_t count = (bytes + ps - 1) / ps;
  std::vector<void*> pages(count);
  for (std::size_t i = 0; i < count; ++i)
    pages[i] = const_cast<unsigned char*>(static_cast<const unsigned char*>(p) + i * ps);
  std::vector<int> status(count, 0);
  if (count != 0 &&
      ::move_pages(0, static_cast<unsigned long>(count), pages.data(), nullptr, status.data(),
                   0) != 0)
    fail("move_pages(pid=0, count=" + std::to_string(count) + ", pages from " + hex(p) +
             ", nodes=NULL)",
         errno);
  return status;
}

memory_policy policy_at(const void* addr) {
  const std::size_t longs = mask_longs();
  std::vector<unsigned long> mask(longs, 0);
  int mode = 0;
  if (::get_mempolicy(&mode, mask.data(), longs * bits_per_long, const_cast<void*>(addr),
                      MPOL_F_ADDR) != 0)
    fail("get_mempolicy(MPOL_F_ADDR, addr=" + hex(addr) + ")", errno);
  memory_policy out;
  // MPOL_MODE_FLAGS of linux/mempolicy.h (STATIC_NODES, RELATIVE_NODES, NUMA_BALANCING), which
  // numaif.h does not define.
  constexpr int mode_flags = (1 << 15) | (1 << 14) | (1 << 13);
  out.mode = mode & ~mode_flags;
  for (std::size_t n = 0; n < longs * bits_per_long; ++n)
    if (mask[n / bits_per_long] & (1UL << (n % bits_per_long)))
      out.nodes.push_back(static_cast<int>(n));
  return out;
}

std::string policy_name(int mode) {
  switch (mode) {
    case MPOL_DEFAULT: return "default";
    case MPOL_PREFERRED: return "preferred";
    case MPOL_BIND: return "bind";
    case MPOL_INTERLEAVE: return "interleave";
    case MPOL_LOCAL: return "local";
    default: return "mode " + std::to_string(mode);
  }
}

std::optional<std::size_t> thp_bytes_by_page(const void* p, std::size_t bytes) {
  constexpr std::uint64_t present = std::uint64_t{1} << 63;
  constexpr std::uint64_t pfn_mask = (std::uint64_t{1} << 55) - 1;
  constexpr std::uint64_t kpf_thp = std::uint64_t{1} << 22;
  const fd_reader pagemap("/proc/self/pagemap");
  const fd_reader kpageflags("/proc/kpageflags");
  if (!pagemap.ok() || !kpageflags.ok()) return std::nullopt;

  const std::size_t ps = page_size();
  const std::uint64_t first = reinterpret_cast<std::uintptr_t>(p) / ps;
  const std::size_t count = (bytes + ps - 1) / ps;
  constexpr std::size_t batch = 512;
  std::vector<std::uint64_t> entries(batch);
  std::size_t thp_pages = 0;
  for (std::size_t done = 0; done < count; done += batch) {
    const std::size_t n = std::min(batch, count - done);
    if (!pagemap.read(first + done, entries.data(), n)) return std::nullopt;
    for (std::size_t i = 0; i < n; ++i) {
      if (!(entries[i] & present)) continue;
      const std::uint64_t pfn = entries[i] & pfn_mask;
      if (pfn == 0) return std::nullopt;  // frame numbers hidden: not CAP_SYS_ADMIN
      std::uint64_t flags = 0;
      if (!kpageflags.read(pfn, &flags, 1)) return std::nullopt;
      if (flags & kpf_thp) ++thp_pages;
    }
  }
  return thp_pages * ps;
}

// Note [Calling thread's node]
// The `local` policy asks this on every allocation that misses the fixed-policy fast path, CPU
// tensors' included. getcpu() is a vDSO call (19 ns on a KVM guest: docs/log/
// 2026-12-05-cpu-tensor-call-path.md); sched_getcpu() reads the CPU from the thread's rseq area,
// which glibc 2.35 and later register for every thread (2 ns), and falls back to getcpu() itself
// where rseq is off. A CPU's node is fixed while the CPU exists, so a table of the configured CPUs'
// nodes (libnuma, built once) turns the CPU into its node; a CPU outside the table (hot-added
// later) or of unknown node asks getcpu().
namespace {

int node_by_getcpu() {
  unsigned cpu = 0, node = 0;
  if (::getcpu(&cpu, &node) != 0) fail("getcpu()", errno);
  return static_cast<int>(node);
}

std::vector<int> node_of_each_cpu() {
  std::vector<int> nodes;
  if (numa_available() < 0) return nodes;
  const int cpus = numa_num_configured_cpus();
  for (int cpu = 0; cpu < cpus; ++cpu) nodes.push_back(numa_node_of_cpu(cpu));
  return nodes;
}

}  // namespace

int current_node() {
  static const std::vector<int> nodes = node_of_each_cpu();
  const int cpu = ::sched_getcpu();
  if (cpu >= 0 && static_cast<std::size_t>(cpu) < nodes.size() &&
      nodes[static_cast<std::size_t>(cpu)] >= 0)
    return nodes[static_cast<std::size_t>(cpu)];
  return node_by_getcpu();
}

std::vector<int> allowed_nodes() {
  std::vector<int> nodes;
  if (numa_available() < 0) return {0};  // no NUMA support in the kernel: one implicit node
  for (unsigned n = 0; n < numa_all_nodes_ptr->size; ++n)
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, n)) nodes.push_back(static_cast<int>(n));
  return nodes;
}

std::vector<unsigned> node_cpus(int node) {
  struct bitmask* cpus = numa_allocate_cpumask();
  if (numa_node_to_cpus(node, cpus) != 0) {
    const int err = errno;
    numa_free_cpumask(cpus);
    fail("numa_node_to_cpus(node=" + std::to_string(node) + ")", err);
  }
  std::vector<unsigned> out;
  for (unsigned c = 0; c < cpus->size; ++c)
    if (numa_bitmask_isbitset(cpus, c) && numa_bitmask_isbitset(numa_all_cpus_ptr, c))
      out.push_back(c);
  numa_free_cpumask(cpus);
  return out;
}

void run_pinned(const std::vector<unsigned>& cpus, const std::function<void()>& fn) {
  if (cpus.empty())
    throw_error(errc::invalid_argument, "run_pinned: no CPU to pin the thread to");
  std::exception_ptr failure;
  std::thread worker([&] {
    try {
      cpu_set_t set;
      CPU_ZERO(&set);
      std::string list;
      for (unsigned c : cpus) {
        if (c >= CPU_SETSIZE)
          throw_error(errc::invalid_argument,
                      "run_pinned: CPU " + std::to_string(c) + " is beyond CPU_SETSIZE");
        CPU_SET(c, &set);
        list += (list.empty() ? "" : ",") + std::to_string(c);
      }
      if (const int err = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set); err != 0)
        fail("pthread_setaffinity_np(cpus={" + list + "})", err);
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  worker.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace umem::alloc::os
