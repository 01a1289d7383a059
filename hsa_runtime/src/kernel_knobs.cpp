#include "umem/hsa_runtime/kernel_knobs.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/detail/meminfo.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::hsa {
namespace {

constexpr std::string_view blanks = " \t\r\n";

using umem::detail::trim;

std::vector<std::string_view> split(std::string_view s, std::string_view separators) {
  std::vector<std::string_view> parts;
  while (!s.empty()) {
    const auto end = s.find_first_of(separators);
    if (end != 0) parts.push_back(s.substr(0, end));
    if (end == std::string_view::npos) break;
    s.remove_prefix(end + 1);
  }
  return parts;
}

[[noreturn]] void throw_garbage(const fs_root& root, const std::string& path, std::size_t line,
                                std::string_view content, std::string_view expected) {
  throw_error(errc::parse_error, root.resolve(path).string() + ":" + std::to_string(line) +
                                     ": expected " + std::string(expected) + ", got '" +
                                     std::string(content.substr(0, 100)) +
                                     "'; the file is damaged or the capture is wrong");
}

template <class T>
bool parse_integer(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

template <class T>
std::optional<T> read_integer(const fs_root& root, const std::string& path) {
  const auto line = root.read_line(path);
  if (!line) return std::nullopt;
  T v{};
  if (!parse_integer(trim(*line), v)) throw_garbage(root, path, 1, *line, "an integer");
  return v;
}

// "always [madvise] never" -> "madvise": sysfs brackets the active choice.
std::optional<std::string> read_bracketed_choice(const fs_root& root, const std::string& path) {
  const auto line = root.read_line(path);
  if (!line) return std::nullopt;
  const auto open = line->find('[');
  const auto close = line->find(']', open == std::string::npos ? 0 : open);
  const bool one_pair = open != std::string::npos && close != std::string::npos &&
                        line->find('[', open + 1) == std::string::npos;
  const std::string choice = one_pair ? line->substr(open + 1, close - open - 1) : std::string();
  if (choice.empty() || choice.find_first_of(blanks) != std::string::npos)
    throw_garbage(root, path, 1, *line, "a list of choices with the active one in [brackets]");
  return choice;
}

std::optional<std::uint64_t> read_mem_total(const fs_root& root) {
  const std::string path = "/proc/meminfo";
  const auto text = root.read(path);
  if (!text) return std::nullopt;
  if (const auto bytes = umem::detail::meminfo_bytes(root, path, *text, "MemTotal")) return bytes;
  throw_garbage(root, path, 1, text->substr(0, text->find('\n')), "a MemTotal line");
}

struct ttm_limits {
  std::string module;
  std::optional<std::uint64_t> pages_limit, page_pool_size;
};

// AMD's DKMS amdgpu uses its own amdttm; the in-tree ttm module may be loaded beside it for
// other DRM drivers (a BMC's display), so amdttm wins whenever it is there.
ttm_limits read_ttm(const fs_root& root) {
  for (const char* module : {"amdttm", "ttm"}) {
    const std::string dir = std::string("/sys/module/") + module + "/parameters/";
    ttm_limits t{module, read_integer<std::uint64_t>(root, dir + "pages_limit"),
                 read_integer<std::uint64_t>(root, dir + "page_pool_size")};
    if (t.pages_limit || t.page_pool_size) return t;
  }
  return {};
}

// What the kernel command line says about the IOMMU; last word wins, as in the kernel.
struct cmdline_iommu {
  bool readable = false;
  std::optional<bool> passthrough;
  std::string passthrough_token;
  std::string off_token;
};

cmdline_iommu read_cmdline_iommu(const fs_root& root) {
  cmdline_iommu c;
  const auto text = root.read("/proc/cmdline");
  if (!text) return c;
  c.readable = true;
  for (std::string_view token : split(*text, " \t\r\n")) {
    if (token == "--") break;  // the rest is for init, not the kernel
    const auto eq = token.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = token.substr(0, eq);
    const std::string_view value = token.substr(eq + 1);
    if (key == "iommu.passthrough") {
      const bool on = value == "1" || value == "y" || value == "Y" || value == "on";
      c.passthrough = on;
      c.passthrough_token = token;
      continue;
    }
    if (key != "iommu" && key != "amd_iommu" && key != "intel_iommu") continue;
    for (std::string_view option : split(value, ",")) {
      if (option == "off") c.off_token = token;
      if (key == "iommu" && (option == "pt" || option == "nopt")) {
        c.passthrough = option == "pt";
        c.passthrough_token = token;
      }
    }
  }
  return c;
}


void decide_iommu(const fs_root& root, kernel_knobs& k) {
  const std::vector<std::string> units = root.list("/sys/class/iommu");
  const cmdline_iommu cmd = read_cmdline_iommu(root);
  const bool cmd_pt = cmd.passthrough.value_or(false);
  if (!units.empty()) {
    const std::string registered = "IOMMU units " + umem::detail::join(units, ", ") + " are registered in /sys/class/iommu";
    std::size_t identity = 0;
    for (const std::string& group : root.list("/sys/kernel/iommu_groups")) {
      const auto type = root.read_line("/sys/kernel/iommu_groups/" + group + "/type");
      if (!type) continue;
      if (type->starts_with("DMA")) {
        k.iommu = iommu_mode::translated;
        k.iommu_evidence = registered + " and IOMMU group " + group + " has default domain type " +
                           *type + ": device DMA is translated";
        return;
      }
      if (*type == "identity") ++identity;
    }
    if (identity > 0) {
      k.iommu = iommu_mode::passthrough;
      k.iommu_evidence = registered + " and " + std::to_string(identity) +
                         " IOMMU groups have default domain type identity, none DMA: passthrough";
    } else if (cmd_pt) {
      k.iommu = iommu_mode::passthrough;
      k.iommu_evidence = registered + " and /proc/cmdline has " + cmd.passthrough_token;
    } else {
      k.iommu = iommu_mode::translated;
      k.iommu_evidence = registered + " and " +
                         (cmd.readable ? "/proc/cmdline has no iommu=pt or iommu.passthrough=1"
                                       : "there is no /proc/cmdline asking for passthrough") +
                         ": device DMA is translated";
    }
    return;
  }
  if (!cmd.off_token.empty()) {
    k.iommu = iommu_mode::off;
    k.iommu_evidence = "/proc/cmdline has " + cmd.off_token + " and no IOMMU unit is registered";
  } else if (root.exists("/sys/class/iommu")) {
    k.iommu = iommu_mode::off;
    k.iommu_evidence = "no IOMMU unit is registered in /sys/class/iommu";
  } else if (cmd_pt) {
    k.iommu = iommu_mode::passthrough;
    k.iommu_evidence = "/proc/cmdline has " + cmd.passthrough_token +
                       " (/sys/class/iommu is absent, so no unit could be checked)";
  } else {
    k.iommu = iommu_mode::unknown;
    k.iommu_evidence = "/sys/class/iommu is absent (not captured, or a kernel without IOMMU "
                       "support) and /proc/cmdline does not say off or passthrough";
  }
}

}  // namespace

kernel_knobs read_kernel_knobs(const fs_root& root) {
  kernel_knobs k;
  k.amdgpu_noretry = read_integer<int>(root, "/sys/module/amdgpu/parameters/noretry");
  ttm_limits ttm = read_ttm(root);
  k.ttm_module = std::move(ttm.module);
  k.ttm_pages_limit = ttm.pages_limit;
  k.ttm_page_pool_size = ttm.page_pool_size;
  k.thp_enabled = read_bracketed_choice(root, "/sys/kernel/mm/transparent_hugepage/enabled");
  k.thp_defrag = read_bracketed_choice(root, "/sys/kernel/mm/transparent_hugepage/defrag");
  k.numa_balancing = read_integer<int>(root, "/proc/sys/kernel/numa_balancing");
  k.compaction_proactiveness = read_integer<int>(root, "/proc/sys/vm/compaction_proactiveness");
  k.compact_unevictable_allowed = read_integer<int>(root, "/proc/sys/vm/compact_unevictable_allowed");
  decide_iommu(root, k);
  k.mem_total_bytes = read_mem_total(root);
  log().debug("kernel knobs from {}: ttm module '{}', IOMMU {} ({})", root.root().string(),
              k.ttm_module, to_string(k.iommu), k.iommu_evidence);
  return k;
}

}  // namespace umem::hsa
