#include "umem/allocator/residency.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"

namespace umem::alloc {
namespace {

// 16384 pages (64 MiB of 4 KiB pages) per move_pages call bounds the temporary vectors.
constexpr std::size_t pages_per_batch = 16384;

struct vma_totals {
  std::size_t anon_huge_bytes = 0;
  bool all_advised = true;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;  // [start, end), ascending

  bool maps(std::uintptr_t addr) const {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const auto& r) { return r.first <= addr && addr < r.second; });
  }
};

// Sums AnonHugePages and checks VmFlags 'hg' over the VMAs of /proc/self/smaps overlapping
// [lo, hi). smaps lists each VMA as a "start-end perms ..." header followed by "Key: value" lines.
vma_totals scan_smaps(std::uintptr_t lo, std::uintptr_t hi) {
  const auto text = fs_root("/").read("/proc/self/smaps");
  if (!text) throw_error(errc::unsupported, "/proc/self/smaps is missing (procfs not mounted?)");
  vma_totals t;
  bool inside = false;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(':');
    const std::size_t dash = line.find('-');
    // Headers start with a lowercase hex address, "Key:" lines with an uppercase letter.
    const bool header = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                        !std::isupper(static_cast<unsigned char>(line[0])) &&
                        dash != std::string::npos;
    if (header) {
      const std::uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
      const std::uintptr_t end = std::stoull(line.substr(dash + 1), nullptr, 16);
      inside = start < hi && end > lo;
      if (inside) t.ranges.emplace_back(start, end);
      continue;
    }
    if (!inside) continue;
    const std::string_view key = std::string_view(line).substr(0, colon);
    if (key == "AnonHugePages") {
      t.anon_huge_bytes += std::stoull(line.substr(colon + 1)) * 1024;  // "N kB"
    } else if (key == "VmFlags") {
      std::istringstream flags(line.substr(colon + 1));
      const std::vector<std::string> all{std::istream_iterator<std::string>(flags), {}};
      t.all_advised = t.all_advised && std::find(all.begin(), all.end(), "hg") != all.end();
    }
  }
  t.all_advised = t.all_advised && !t.ranges.empty();
  return t;
}

}  // namespace

const char* to_string(huge_page_granularity g) {
  return g == huge_page_granularity::page ? "page" : "vma";
}

residency_report query_residency(const void* p, std::size_t n, const gpu_mapper* mapper) {
  if (n == 0) throw_error(errc::invalid_argument, "residency query: the range is empty");
  residency_report r;
  r.page_size = os::page_size();
  const auto lo = reinterpret_cast<std::uintptr_t>(p) / r.page_size * r.page_size;
  const auto hi = (reinterpret_cast<std::uintptr_t>(p) + n + r.page_size - 1) / r.page_size *
                  r.page_size;
  r.base = reinterpret_cast<std::uintptr_t>(p);
  r.bytes = n;
  r.total_pages = (hi - lo) / r.page_size;

  // smaps first: -EFAULT from move_pages means "not present" inside a mapping (see the header).
  const vma_totals vmas = scan_smaps(lo, hi);
  const auto* first = reinterpret_cast<const unsigned char*>(lo);
  for (std::size_t done = 0; done < r.total_pages; done += pages_per_batch) {
    const std::size_t count = std::min(pages_per_batch, r.total_pages - done);
    const auto status = os::page_nodes(first + done * r.page_size, count * r.page_size);
    for (std::size_t i = 0; i < count; ++i) {
      if (status[i] >= 0) {
        ++r.pages_per_node[status[i]];
      } else if (status[i] == -ENOENT ||
                 (status[i] == -EFAULT && vmas.maps(lo + (done + i) * r.page_size))) {
        ++r.not_present_pages;
      } else if (status[i] == -EFAULT) {
        ++r.unmapped_pages;
      } else {
        ++r.other_pages;
      }
    }
  }

  r.huge_pages_advised = vmas.all_advised;
  if (auto exact = os::thp_bytes_by_page(first, hi - lo)) {
    r.huge_page_bytes = *exact;
    r.huge_granularity = huge_page_granularity::page;
  } else {
    r.huge_page_bytes = vmas.anon_huge_bytes;
    r.huge_granularity = huge_page_granularity::vma;
  }

  // get_mempolicy(MPOL_F_ADDR) fails with EFAULT where nothing is mapped: no policy to report.
  try {
    r.policy = os::policy_at(p);
  } catch (const error&) {
    r.policy.reset();
  }

  if (mapper) {
    r.gpu_accessible = mapper->gpu_accessible();
    r.gpu_access = mapper->describe();
  } else {
    r.gpu_access = "unknown: no GPU mapper given";
  }
  return r;
}

std::string to_json(const residency_report& r, int indent) {
  nlohmann::json per_node = nlohmann::json::object();
  for (const auto& [node, pages] : r.pages_per_node) per_node[std::to_string(node)] = pages;
  std::ostringstream base;
  base << "0x" << std::hex << r.base;
  nlohmann::json j = {
      {"base", base.str()},
      {"bytes", r.bytes},
      {"page_size", r.page_size},
      {"pages",
       {{"total", r.total_pages},
        {"per_node", per_node},
        {"not_present", r.not_present_pages},
        {"unmapped", r.unmapped_pages},
        {"other", r.other_pages}}},
      {"huge_pages",
       {{"bytes", r.huge_page_bytes},
        {"granularity", to_string(r.huge_granularity)},
        {"advised", r.huge_pages_advised}}},
      {"policy", r.policy ? nlohmann::json{{"mode", os::policy_name(r.policy->mode)},
                                           {"nodes", r.policy->nodes}}
                          : nlohmann::json()},
      {"gpu",
       {{"accessible", r.gpu_accessible ? nlohmann::json(*r.gpu_accessible) : nlohmann::json()},
        {"mechanism", r.gpu_access}}},
  };
  return j.dump(indent);
}

}  // namespace umem::alloc
