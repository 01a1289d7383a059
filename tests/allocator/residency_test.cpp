// The residency report against the kernel's own answers (move_pages, /proc/self/smaps), read here
// directly.
#include "umem/allocator/residency.hpp"

#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"

namespace {

using namespace umem::alloc;

constexpr std::size_t mib = std::size_t{1} << 20;
const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

struct segment_guard {
  host_numa_source src;
  segment s;
  segment_guard(host_source_config cfg, std::size_t bytes)
      : src(cfg), s(src.allocate(bytes, {bind_mode::bind, {0}}, umem::coherence::fine)) {}
  ~segment_guard() { src.deallocate(s); }
  segment_guard(const segment_guard&) = delete;
  segment_guard& operator=(const segment_guard&) = delete;
  char* at(std::size_t off) const { return static_cast<char*>(s.base) + off; }
};

// Pages per node of [p, p+n) straight from move_pages; negative statuses keyed as they are.
std::map<int, std::size_t> kernel_counts(const void* p, std::size_t n) {
  std::vector<void*> pages;
  for (std::size_t off = 0; off < n; off += page)
    pages.push_back(const_cast<char*>(static_cast<const char*>(p)) + off);
  std::vector<int> status(pages.size());
  EXPECT_EQ(move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0), 0)
      << std::strerror(errno);
  std::map<int, std::size_t> counts;
  for (int s : status) ++counts[s];
  return counts;
}

// Pages the kernel reports without a node: -ENOENT, or -EFAULT on Linux 6.1 for an untouched
// anonymous range (residency.hpp, Note [Not present]).
std::size_t absent(const std::map<int, std::size_t>& counts) {
  std::size_t n = 0;
  for (int st : {-ENOENT, -EFAULT})
    if (counts.count(st)) n += counts.at(st);
  return n;
}

// AnonHugePages (bytes) of the smaps VMA that starts at `lo` and ends at `hi` exactly; nullopt if
// the VMA has other bounds (merged with a neighbour).
std::optional<std::size_t> anon_huge_of_exact_vma(std::uintptr_t lo, std::uintptr_t hi) {
  std::ifstream in("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &a, &b) == 2 && line.find('-') < line.find(' ')) {
      inside = a == lo && b == hi;
    } else if (unsigned long kb = 0;
               inside && std::sscanf(line.c_str(), "AnonHugePages: %lu kB", &kb) == 1) {
      return kb * 1024;
    }
  }
  return std::nullopt;
}

class fake_mapper final : public gpu_mapper {
 public:
  void map(const segment&) override {}
  void unmap(const segment&) noexcept override {}
  bool gpu_accessible() const override { return true; }
  bool pageable() const override { return false; }
  std::string describe() const override { return "test mapper: locked to CPU agent 0's pool"; }
};

TEST(residency, touched_memory_is_all_on_node0_and_agrees_with_move_pages) {
  segment_guard g({true, populate_mode::touch}, 8 * mib);
  const residency_report r = query_residency(g.s.base, g.s.size);
  EXPECT_EQ(r.base, reinterpret_cast<std::uintptr_t>(g.s.base));
  EXPECT_EQ(r.bytes, 8 * mib);
  EXPECT_EQ(r.page_size, page);
  EXPECT_EQ(r.total_pages, 8 * mib / page);
  EXPECT_EQ(r.pages_per_node, (std::map<int, std::size_t>{{0, 8 * mib / page}}));
  EXPECT_EQ(kernel_counts(g.s.base, g.s.size), (std::map<int, std::size_t>{{0, 8 * mib / page}}));
  EXPECT_EQ(r.not_present_pages + r.unmapped_pages + r.other_pages, 0u);
  ASSERT_TRUE(r.policy.has_value());
  EXPECT_EQ(r.policy->mode, MPOL_BIND);
  EXPECT_EQ(r.policy->nodes, std::vector<int>{0});
}

TEST(residency, untouched_and_half_touched_ranges) {
  segment_guard g({true, populate_mode::none}, 4 * mib);
  const residency_report none = query_residency(g.s.base, g.s.size);
  EXPECT_TRUE(none.pages_per_node.empty());
  EXPECT_EQ(none.not_present_pages, 4 * mib / page);
  EXPECT_EQ(absent(kernel_counts(g.s.base, g.s.size)), 4 * mib / page);

  // Touching the first 2 MiB (one aligned huge page) makes exactly its pages present, whether a
  // THP or 4 KiB pages back it.
  for (std::size_t off = 0; off < 2 * mib; off += page) *g.at(off) = 1;
  const residency_report half = query_residency(g.s.base, g.s.size);
  const auto kernel = kernel_counts(g.s.base, g.s.size);
  EXPECT_EQ(half.pages_per_node.at(0), kernel.at(0));
  EXPECT_EQ(half.not_present_pages, absent(kernel));
  EXPECT_EQ(half.not_present_pages, 2 * mib / page);
  EXPECT_EQ(half.pages_per_node.at(0), 2 * mib / page);
}

TEST(residency, an_unaligned_range_counts_every_page_it_touches) {
  segment_guard g({false, populate_mode::touch}, 2 * mib);
  const residency_report r = query_residency(g.at(page - 100), 200);  // straddles two pages
  EXPECT_EQ(r.total_pages, 2u);
  EXPECT_EQ(r.pages_per_node, (std::map<int, std::size_t>{{0, 2}}));
  EXPECT_EQ(r.bytes, 200u);
}

TEST(residency, ranges_longer_than_one_move_pages_batch) {
  // 80 MiB = 20480 pages: more than the 16384 pages of one batch.
  segment_guard g({false, populate_mode::touch}, 80 * mib);
  const residency_report r = query_residency(g.s.base, g.s.size);
  EXPECT_EQ(r.pages_per_node, (std::map<int, std::size_t>{{0, 80 * mib / page}}));
}

TEST(residency, unmapped_memory_has_no_pages_and_no_policy) {
  // Another thread of this process (a sanitizer's runtime, say) may map into the hole between
  // munmap and the query; a fresh hole is tried then, a few times.
  residency_report r;
  for (int attempt = 0; attempt < 8; ++attempt) {
    void* p = mmap(nullptr, 2 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(munmap(p, 2 * mib), 0);
    r = query_residency(p, 2 * mib);
    if (r.pages_per_node.empty()) break;
  }
  EXPECT_EQ(r.unmapped_pages, 2 * mib / page);
  EXPECT_TRUE(r.pages_per_node.empty());
  EXPECT_FALSE(r.policy.has_value());
}

TEST(residency, huge_pages_off_means_no_huge_bytes) {
  segment_guard g({false, populate_mode::touch}, 8 * mib);
  const residency_report r = query_residency(g.s.base, g.s.size);
  EXPECT_EQ(r.huge_page_bytes, 0u);
  EXPECT_FALSE(r.huge_pages_advised);
}

TEST(residency, huge_page_bytes_agree_with_smaps_and_are_page_exact_as_root) {
  segment_guard g({true, populate_mode::touch}, 8 * mib);
  const residency_report r = query_residency(g.s.base, g.s.size);
  EXPECT_TRUE(r.huge_pages_advised);
  EXPECT_EQ(r.huge_granularity,
            geteuid() == 0 ? huge_page_granularity::page : huge_page_granularity::vma);
  EXPECT_EQ(r.huge_page_bytes % (2 * mib), 0u);
  EXPECT_LE(r.huge_page_bytes, g.s.size);
  const auto lo = reinterpret_cast<std::uintptr_t>(g.s.base);
  if (auto smaps = anon_huge_of_exact_vma(lo, lo + g.s.size))
    EXPECT_EQ(r.huge_page_bytes, *smaps);
  else
    GTEST_SKIP() << "the segment's VMA merged with a neighbour; smaps cannot be compared";
}

TEST(residency, gpu_access_comes_from_the_mapper_when_given) {
  segment_guard g({true, populate_mode::none}, 2 * mib);
  const residency_report unknown = query_residency(g.s.base, g.s.size);
  EXPECT_FALSE(unknown.gpu_accessible.has_value());
  EXPECT_EQ(unknown.gpu_access, "unknown: no GPU mapper given");
  const fake_mapper mapper;
  const residency_report known = query_residency(g.s.base, g.s.size, &mapper);
  EXPECT_EQ(known.gpu_accessible, std::optional<bool>(true));
  EXPECT_EQ(known.gpu_access, "test mapper: locked to CPU agent 0's pool");
}

TEST(residency, json_export_carries_every_field) {
  segment_guard g({false, populate_mode::touch}, 2 * mib);
  const fake_mapper mapper;
  const auto j = nlohmann::json::parse(to_json(query_residency(g.s.base, g.s.size, &mapper)));
  char base[32];
  std::snprintf(base, sizeof base, "0x%lx", reinterpret_cast<unsigned long>(g.s.base));
  EXPECT_EQ(j.at("base"), base);
  EXPECT_EQ(j.at("bytes"), 2 * mib);
  EXPECT_EQ(j.at("page_size"), page);
  EXPECT_EQ(j.at("pages").at("total"), 2 * mib / page);
  EXPECT_EQ(j.at("pages").at("per_node").at("0"), 2 * mib / page);
  EXPECT_EQ(j.at("pages").at("not_present"), 0);
  EXPECT_EQ(j.at("pages").at("unmapped"), 0);
  EXPECT_EQ(j.at("pages").at("other"), 0);
  EXPECT_EQ(j.at("huge_pages").at("bytes"), 0);
  EXPECT_EQ(j.at("huge_pages").at("advised"), false);
  EXPECT_TRUE(j.at("huge_pages").at("granularity") == "page" ||
              j.at("huge_pages").at("granularity") == "vma");
  EXPECT_EQ(j.at("policy").at("mode"), "bind");
  EXPECT_EQ(j.at("policy").at("nodes"), nlohmann::json::array({0}));
  EXPECT_EQ(j.at("gpu").at("accessible"), true);
  EXPECT_EQ(j.at("gpu").at("mechanism"), "test mapper: locked to CPU agent 0's pool");
  // Without a mapper "accessible" is null, not false.
  EXPECT_TRUE(nlohmann::json::parse(to_json(query_residency(g.s.base, page), -1))
                  .at("gpu")
                  .at("accessible")
                  .is_null());
}

TEST(residency, an_empty_range_is_invalid) {
  int x = 0;
  try {
    (void)query_residency(&x, 0);
    ADD_FAILURE() << "no error";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::invalid_argument);
    EXPECT_STREQ(e.what(), "residency query: the range is empty");
  }
}

}  // namespace
