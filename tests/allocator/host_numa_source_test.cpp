// host_numa_source on this machine, checked with the kernel's own answers (get_mempolicy,
// move_pages, /proc/self/smaps) read here directly rather than through umem's wrappers.
#include "umem/allocator/source/host_numa_source.hpp"

#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/numa/node_meminfo.hpp"

namespace {

using umem::alloc::bind_mode;
using umem::alloc::host_numa_source;
using umem::alloc::host_source_config;
using umem::alloc::node_binding;
using umem::alloc::populate_mode;
using umem::alloc::segment;

constexpr std::size_t mib = std::size_t{1} << 20;
const node_binding bind0{bind_mode::bind, {0}};

// Frees a segment at scope exit.
struct segment_guard {
  host_numa_source& src;
  segment s;
  ~segment_guard() { src.deallocate(s); }
};

struct policy {
  int mode = -1;
  unsigned long mask = 0;  // nodes 0-63
};

policy policy_at(const void* p) {
  policy out;
  unsigned long mask[16] = {};
  if (get_mempolicy(&out.mode, mask, 16 * 64, const_cast<void*>(p), MPOL_F_ADDR) != 0)
    ADD_FAILURE() << "get_mempolicy: " << std::strerror(errno);
  out.mask = mask[0];
  return out;
}

// move_pages(nodes=NULL) status of every 4 KiB page of [p, p+n).
std::vector<int> page_status(const void* p, std::size_t n) {
  const std::size_t ps = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<void*> pages;
  for (std::size_t off = 0; off < n; off += ps)
    pages.push_back(const_cast<char*>(static_cast<const char*>(p)) + off);
  std::vector<int> status(pages.size(), 1234);
  EXPECT_EQ(move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0), 0)
      << std::strerror(errno);
  return status;
}

// VmFlags of the /proc/self/smaps VMA containing `p` ("" if none).
std::string vm_flags_of(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < line.find(' '))
      inside = lo <= addr && addr < hi;
    else if (inside && line.rfind("VmFlags:", 0) == 0)
      return line.substr(8) + " ";
  }
  return "";
}

// /sys/devices/system/node/online, e.g. "0" or "0-3": the kernel's own list of nodes.
std::string online_nodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(host_numa_source, sizes_round_up_to_2mib_and_bases_are_2mib_aligned) {
  host_numa_source src;
  for (std::size_t bytes : {std::size_t{1}, 2 * mib, 2 * mib + 1, 3 * mib + 4096, 10 * mib}) {
    segment_guard g{src, src.allocate(bytes, bind0, umem::coherence::fine)};
    EXPECT_EQ(g.s.size, (bytes + 2 * mib - 1) / (2 * mib) * (2 * mib)) << bytes;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(g.s.base) % (2 * mib), 0u) << bytes;
    EXPECT_EQ(g.s.binding, bind0);
  }
}

TEST(host_numa_source, segment_records_coherence_and_huge_page_choice) {
  host_numa_source on;
  segment_guard a{on, on.allocate(1, bind0, umem::coherence::coarse)};
  EXPECT_EQ(a.s.kind, umem::coherence::coarse);
  EXPECT_TRUE(a.s.huge_pages);
  host_numa_source off(host_source_config{false, populate_mode::none});
  segment_guard b{off, off.allocate(1, bind0, umem::coherence::fine)};
  EXPECT_FALSE(b.s.huge_pages);
}

TEST(host_numa_source, bind_is_mpol_bind_to_node0_over_the_whole_segment) {
  host_numa_source src;
  segment_guard g{src, src.allocate(6 * mib, bind0, umem::coherence::fine)};
  for (const char* p : {static_cast<const char*>(g.s.base),
                        static_cast<const char*>(g.s.base) + g.s.size - 1}) {
    const policy pol = policy_at(p);
    EXPECT_EQ(pol.mode, MPOL_BIND);
    EXPECT_EQ(pol.mask, 1ul);
  }
}

TEST(host_numa_source, preferred_and_interleave_modes_reach_the_kernel) {
  host_numa_source src;
  segment_guard pref{src, src.allocate(1, {bind_mode::preferred, {0}}, umem::coherence::fine)};
  EXPECT_EQ(policy_at(pref.s.base).mode, MPOL_PREFERRED);
  EXPECT_EQ(policy_at(pref.s.base).mask, 1ul);
  segment_guard il{src, src.allocate(1, {bind_mode::interleave, {0}}, umem::coherence::fine)};
  EXPECT_EQ(policy_at(il.s.base).mode, MPOL_INTERLEAVE);
  EXPECT_EQ(policy_at(il.s.base).mask, 1ul);
}

TEST(host_numa_source, huge_pages_are_advised_or_refused_as_configured) {
  host_numa_source on;
  segment_guard a{on, on.allocate(4 * mib, bind0, umem::coherence::fine)};
  EXPECT_NE(vm_flags_of(a.s.base).find(" hg "), std::string::npos) << vm_flags_of(a.s.base);
  host_numa_source off(host_source_config{false, populate_mode::none});
  segment_guard b{off, off.allocate(4 * mib, bind0, umem::coherence::fine)};
  EXPECT_NE(vm_flags_of(b.s.base).find(" nh "), std::string::npos) << vm_flags_of(b.s.base);
  EXPECT_EQ(vm_flags_of(b.s.base).find(" hg "), std::string::npos);
}

TEST(host_numa_source, without_population_no_page_is_present) {
  host_numa_source src;
  segment_guard g{src, src.allocate(4 * mib, bind0, umem::coherence::fine)};
  // -ENOENT on recent kernels; -EFAULT on Linux 6.1 while the range has no page tables yet.
  for (int st : page_status(g.s.base, g.s.size)) ASSERT_TRUE(st == -ENOENT || st == -EFAULT) << st;
}

TEST(host_numa_source, touch_and_map_populate_make_every_page_present_on_node0) {
  for (populate_mode mode : {populate_mode::touch, populate_mode::map_populate}) {
    for (bool huge : {true, false}) {
      host_numa_source src(host_source_config{huge, mode});
      segment_guard g{src, src.allocate(6 * mib, bind0, umem::coherence::fine)};
      const auto status = page_status(g.s.base, g.s.size);
      ASSERT_EQ(status.size(), 6 * mib / 4096);
      for (int st : status) ASSERT_EQ(st, 0) << src.describe();
    }
  }
}

TEST(host_numa_source, a_node_that_does_not_exist_is_an_error_naming_it_and_the_real_nodes) {
  host_numa_source src;
  for (const node_binding& b : {node_binding{bind_mode::bind, {1000}},
                                node_binding{bind_mode::interleave, {0, 1000}}}) {
    try {
      (void)src.allocate(1, b, umem::coherence::fine);
      ADD_FAILURE() << "no error";
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), umem::errc::invalid_argument);
      EXPECT_EQ(std::string(e.what()),
                "host NUMA source: NUMA node 1000 does not exist on this machine (or this "
                "process may not use it); nodes that exist: " +
                    online_nodes());
    }
  }
}

TEST(host_numa_source, misuse_is_invalid_argument) {
  host_numa_source src;
  const auto code_of = [&](std::size_t bytes, const node_binding& b) {
    try {
      src.deallocate(src.allocate(bytes, b, umem::coherence::fine));
    } catch (const umem::error& e) {
      return std::pair{e.code(), std::string(e.what())};
    }
    return std::pair{umem::errc::internal, std::string("no error")};
  };
  EXPECT_EQ(code_of(0, bind0),
            std::pair(umem::errc::invalid_argument,
                      std::string("host NUMA source: size 0 requested")));
  EXPECT_EQ(code_of(1, {bind_mode::bind, {}}),
            std::pair(umem::errc::invalid_argument,
                      std::string("host NUMA source: the binding has no node")));
  EXPECT_EQ(code_of(1, {bind_mode::preferred, {0, 1}}),
            std::pair(umem::errc::invalid_argument,
                      std::string("host NUMA source: preferred takes exactly one node, got {0-1}")));
  EXPECT_EQ(code_of(SIZE_MAX - 100, bind0).first, umem::errc::invalid_argument);
}

TEST(host_numa_source, address_space_exhaustion_is_out_of_memory) {
  // 2^47 bytes is the whole x86-64 user address space: mmap cannot place it (ENOMEM).
  host_numa_source src;
  try {
    (void)src.allocate(std::size_t{1} << 47, bind0, umem::coherence::fine);
    ADD_FAILURE() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
    EXPECT_NE(std::string(e.what()).find("mmap(len=140737490452480"), std::string::npos)
        << e.what();
  }
}

TEST(host_numa_source, deallocate_unmaps_the_segment) {
  host_numa_source src(host_source_config{true, populate_mode::touch});
  const segment s = src.allocate(2 * mib, bind0, umem::coherence::fine);
  src.deallocate(s);
  unsigned char vec[1];
  // mincore fails with ENOMEM on an address that is not mapped.
  EXPECT_EQ(mincore(s.base, 4096, vec), -1);
  EXPECT_EQ(errno, ENOMEM);
}

TEST(host_numa_source, describe_says_what_it_does) {
  EXPECT_EQ(host_numa_source().describe(), "host NUMA memory (mmap+mbind, THP on)");
  EXPECT_EQ(host_numa_source(host_source_config{false, populate_mode::touch}).describe(),
            "host NUMA memory (mmap+mbind, THP off, populate=touch)");
}

}  // namespace

namespace {

// Note [Growable segments]: the grown range is committed, advised and bound like the first part.
TEST(host_numa_source, a_growable_segment_grows_in_place_bound_like_its_first_part) {
  host_numa_source src(host_source_config{false, populate_mode::touch});
  segment s = src.allocate_growable(2 * mib, 8 * mib, bind0, umem::coherence::fine);
  segment_guard g{src, s};
  EXPECT_EQ(s.size, 2 * mib);
  EXPECT_EQ(s.reserved_size, 8 * mib);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.base) % (2 * mib), 0u);
  const char* base = static_cast<const char*>(s.base);
  // Not yet committed: reserved address space without the segment's policy.
  EXPECT_EQ(policy_at(base + 2 * mib).mode, MPOL_DEFAULT);

  ASSERT_TRUE(src.grow(s, 3 * mib));  // rounded up to 4 MiB
  EXPECT_EQ(s.size, 6 * mib);
  for (const char* p : {base + 2 * mib, base + 6 * mib - 1}) {
    EXPECT_EQ(policy_at(p).mode, MPOL_BIND);
    EXPECT_EQ(policy_at(p).mask, 1ul);
  }
  // Populated (touch) on node 0, like the first part.
  for (int st : page_status(base + 2 * mib, 4 * mib)) ASSERT_EQ(st, 0);
  EXPECT_NE(vm_flags_of(base + 2 * mib).find(" wr "), std::string::npos);
  EXPECT_NE(vm_flags_of(base + 2 * mib).find(" nh "), std::string::npos);
  std::memset(const_cast<char*>(base) + 2 * mib, 0x5a, 4 * mib);  // writable

  EXPECT_FALSE(src.grow(s, 4 * mib));  // 2 MiB left in the reservation
  EXPECT_EQ(s.size, 6 * mib);
  ASSERT_TRUE(src.grow(s, 2 * mib));
  EXPECT_EQ(s.size, 8 * mib);
  EXPECT_FALSE(src.grow(s, 1));
  g.s = s;
}

TEST(host_numa_source, growth_keeps_interleave_and_huge_page_advice) {
  host_numa_source src;  // THP on, no population
  segment s = src.allocate_growable(2 * mib, 8 * mib, {bind_mode::interleave, {0}},
                                    umem::coherence::fine);
  segment_guard g{src, s};
  ASSERT_TRUE(src.grow(s, 2 * mib));
  g.s = s;
  const char* grown = static_cast<const char*>(s.base) + 2 * mib;
  EXPECT_EQ(policy_at(grown).mode, MPOL_INTERLEAVE);
  EXPECT_NE(vm_flags_of(grown).find(" hg "), std::string::npos) << vm_flags_of(grown);
}

TEST(host_numa_source, a_reservation_no_larger_than_the_size_is_a_plain_segment) {
  host_numa_source src;
  segment s = src.allocate_growable(4 * mib, 2 * mib, bind0, umem::coherence::fine);
  segment_guard g{src, s};
  EXPECT_EQ(s.reserved_size, 0u);
  EXPECT_FALSE(src.grow(s, 2 * mib));
  EXPECT_EQ(s.size, 4 * mib);
  segment plain = src.allocate(2 * mib, bind0, umem::coherence::fine);
  EXPECT_FALSE(src.grow(plain, 2 * mib));
  src.deallocate(plain);
}

TEST(host_numa_source, deallocate_of_a_grown_segment_unmaps_the_whole_reservation) {
  host_numa_source src(host_source_config{true, populate_mode::touch});
  segment s = src.allocate_growable(2 * mib, 8 * mib, bind0, umem::coherence::fine);
  ASSERT_TRUE(src.grow(s, 2 * mib));
  src.deallocate(s);
  unsigned char vec[1];
  for (std::size_t off : {std::size_t{0}, 2 * mib, 6 * mib}) {  // first part, growth, reserved
    EXPECT_EQ(mincore(static_cast<char*>(s.base) + off, 4096, vec), -1) << off;
    EXPECT_EQ(errno, ENOMEM) << off;
  }
}

}  // namespace

// Note [Decommitted pages]: the pages go, the binding and the huge-page advice stay, and the
// next touch backs a page again on the bound node.
TEST(host_numa_source, decommit_frees_the_pages_and_keeps_the_policy) {
  host_numa_source src(host_source_config{true, populate_mode::touch});
  segment_guard g{src, src.allocate(6 * mib, bind0, umem::coherence::fine)};
  char* middle = static_cast<char*>(g.s.base) + 2 * mib;
  ASSERT_TRUE(src.decommit(g.s, middle, 2 * mib));
  for (int st : page_status(middle, 2 * mib)) ASSERT_TRUE(st == -ENOENT || st == -EFAULT) << st;
  for (int st : page_status(g.s.base, 2 * mib)) ASSERT_EQ(st, 0);  // the rest stays backed
  EXPECT_EQ(policy_at(middle).mode, MPOL_BIND);
  EXPECT_EQ(policy_at(middle).mask, 1ul);
  EXPECT_NE(vm_flags_of(middle).find(" hg "), std::string::npos) << vm_flags_of(middle);
  middle[0] = 1;
  EXPECT_EQ(page_status(middle, 4096).at(0), 0);
}

// recommit() does for given-back pages what allocate() does for fresh ones: populated again
// where the source populates, left to the next touch where it does not.
TEST(host_numa_source, recommit_populates_given_back_pages_as_allocate_does) {
  for (populate_mode mode :
       {populate_mode::none, populate_mode::touch, populate_mode::map_populate}) {
    host_numa_source src(host_source_config{true, mode});
    segment_guard g{src, src.allocate(6 * mib, bind0, umem::coherence::fine)};
    char* middle = static_cast<char*>(g.s.base) + 2 * mib;
    ASSERT_TRUE(src.decommit(g.s, middle, 2 * mib));
    src.recommit(g.s, middle, 2 * mib);
    for (int st : page_status(middle, 2 * mib)) {
      if (mode == populate_mode::none)
        ASSERT_TRUE(st == -ENOENT || st == -EFAULT) << st;
      else
        ASSERT_EQ(st, 0) << src.describe();
    }
  }
}

// A bound range given back is taken again only if the node can still back it.
TEST(host_numa_source, recommitting_more_than_the_node_can_give_is_out_of_memory) {
  const auto room = umem::numa::node_obtainable_bytes(umem::fs_root("/"), 0);
  if (!room) GTEST_SKIP() << "node 0 has no meminfo here";
  host_numa_source src;
  // A reservation larger than the node, of which only 2 MiB is committed: recommit() is asked
  // for the whole of it, as if all of it had been given back.
  const std::size_t whole = static_cast<std::size_t>(*room) + 256 * mib;
  segment_guard g{src, src.allocate_growable(2 * mib, whole, bind0, umem::coherence::fine)};
  try {
    src.recommit(g.s, g.s.base, whole);
    ADD_FAILURE() << "recommit of " << whole << " bytes on a node that can give " << *room;
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
    EXPECT_NE(std::string(e.what()).find("NUMA node(s) 0 can give"), std::string::npos) << e.what();
  }
}

// Note [The real end of a node]: a bound range larger than node 0 can give is refused before any
// page is asked for (the kernel would OOM-kill instead of failing); a preferred one is the
// kernel's to place elsewhere, so it is not refused (its pages are never touched here).
TEST(host_numa_source, a_bound_range_past_what_the_node_can_give_is_out_of_memory) {
  const auto room = umem::numa::node_obtainable_bytes(umem::fs_root("/"), 0);
  if (!room) GTEST_SKIP() << "node 0 has no meminfo here";
  const std::size_t ask = static_cast<std::size_t>(*room) + 256 * mib;
  host_numa_source src;
  try {
    segment_guard g{src, src.allocate(ask, bind0, umem::coherence::fine)};
    ADD_FAILURE() << "a bound " << ask << "-byte range was mapped on a node that can give " << *room;
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::out_of_memory) << e.what();
    EXPECT_NE(std::string(e.what()).find("NUMA node(s) 0 can give"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("wakes the kernel's OOM killer"), std::string::npos);
  }
  segment_guard fits{src, src.allocate(64 * mib, bind0, umem::coherence::fine)};
  EXPECT_EQ(fits.s.size, 64 * mib);
  segment_guard pref{src, src.allocate(ask, {bind_mode::preferred, {0}}, umem::coherence::fine)};
  EXPECT_GE(pref.s.size, ask);
}
