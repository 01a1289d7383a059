#include "checks.hpp"

#include <algorithm>
#include <sstream>

#include "report.hpp"
#include "umem/core/apu_view.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::umtopo {

namespace {

constexpr std::uint64_t kTtmPageBytes = 4096;

finding not_checked(const char* id, const std::string& why, std::string evidence = {}) {
  return {id, severity::info, "not checked: " + why, std::move(evidence), {}};
}

finding ok(const char* id, const std::string& what, std::string evidence) {
  return {id, severity::info, "ok: " + what, std::move(evidence), {}};
}

using umem::detail::join;

std::string noretry_evidence(const kernel_knobs& k) {
  if (!k.amdgpu_noretry) return {};
  return "/sys/module/amdgpu/parameters/noretry = " + std::to_string(*k.amdgpu_noretry) +
         (*k.amdgpu_noretry == 1 ? " (the driver's default for every process is XNACK off)" : "");
}

finding check_xnack(const topology& topo) {
  const auto gpus = topo.gpus();
  const std::string noretry = noretry_evidence(topo.knobs);
  if (gpus.empty()) return not_checked("xnack-off", "no GPU agent in the model", noretry);
  const auto xnack = topo.xnack_enabled();
  std::vector<std::string> evidence;
  if (topo.hsa.xnack_enabled) {
    evidence.push_back(std::string("HSA system attribute XNACK_ENABLED = ") + (*xnack ? "true" : "false"));
  } else {
    // Grouped by ISA: a 4-socket node would otherwise repeat one ISA four times.
    std::vector<std::pair<std::string, std::string>> by_isa;  // ISA, KFD nodes
    for (const agent* g : gpus) {
      if (!g->isa_xnack() || g->isas.empty()) continue;
      auto it = std::find_if(by_isa.begin(), by_isa.end(), [&](const auto& e) { return e.first == g->isas.front(); });
      if (it == by_isa.end()) it = by_isa.insert(by_isa.end(), {g->isas.front(), {}});
      it->second += (it->second.empty() ? "" : ", ") + std::to_string(g->kfd_node);
    }
    for (const auto& [isa, nodes] : by_isa) evidence.push_back("GPU ISA " + isa + " (KFD nodes " + nodes + ")");
  }
  if (!noretry.empty()) evidence.push_back(noretry);
  if (!xnack) return not_checked("xnack-off", "neither the runtime nor a GPU ISA says whether XNACK is on",
                                 join(evidence, "; "));
  if (*xnack) return ok("xnack-off", "XNACK is on: malloc'd and mmap'd memory is GPU-accessible", join(evidence, "; "));
  std::string fix =
      "export HSA_XNACK=1 before the process starts (the runtime reads it once, at hsa_init; setting it "
      "later has no effect), or allocate memory the GPU touches from umem's allocator (fine-grained "
      "pools), which does not need XNACK";
  if (topo.knobs.amdgpu_noretry == 1) fix += "; to make XNACK the default for every process, boot with amdgpu.noretry=0";
  return {"xnack-off", severity::error,
          "XNACK is off: memory from malloc/mmap is not GPU-accessible; a GPU kernel touching it faults and "
          "the runtime aborts the process",
          join(evidence, "; "), fix};
}

struct memory_total {
  std::uint64_t bytes = 0;
  std::string source;
};

memory_total total_memory(const topology& topo, const std::vector<apu_socket>& sockets) {
  memory_total t;
  for (const auto& n : topo.numa.nodes) t.bytes += n.memory_total_bytes;
  if (t.bytes > 0) {
    t.source = "sum of the memory of " + std::to_string(topo.numa.nodes.size()) + " NUMA nodes";
    return t;
  }
  if (topo.knobs.mem_total_bytes) return {*topo.knobs.mem_total_bytes, "MemTotal of /proc/meminfo"};
  for (const auto& s : sockets) t.bytes += s.socket_memory_bytes;
  t.source = "sum of the CPU agents' largest pools";
  return t;
}

std::string ttm_fix(const kernel_knobs& k, std::uint64_t pages) {
  const std::string mod = k.ttm_module.empty() ? "amdttm" : k.ttm_module;
  const std::string n = std::to_string(pages);
  std::string fix = "raise the TTM limit to all memory, " + n + " pages of 4 KiB: put 'options " + mod +
                    " pages_limit=" + n + " page_pool_size=" + n + "' in /etc/modprobe.d/" + mod +
                    ".conf and reload amdgpu (or reboot), or boot with '" + mod + ".pages_limit=" + n + " " +
                    mod + ".page_pool_size=" + n + "' on the kernel command line; verify with 'cat /sys/module/" +
                    mod + "/parameters/pages_limit'";
  if (k.ttm_module.empty())
    fix += " (amdttm is AMD's DKMS driver; with the upstream in-tree amdgpu the module is ttm)";
  return fix;
}

std::string socket_name(const apu_socket& s) {
  return s.numa_node >= 0 ? "NUMA node " + std::to_string(s.numa_node) : "GPUs without a NUMA node";
}

std::string lost_text(std::uint64_t memory, std::uint64_t gpu) {
  return format_gib(memory > gpu ? memory - gpu : 0) + " not GPU-allocatable";
}

finding check_ttm(const topology& topo) {
  const auto sockets = apu_sockets(topo);
  const auto total = total_memory(topo, sockets);
  const auto& k = topo.knobs;
  const std::string total_text = format_gib(total.bytes) + " (" + total.source + ")";
  if (total.bytes == 0) return not_checked("ttm-limit", "the total memory of the node is unknown");

  std::uint64_t gpu_bytes = 0;
  std::vector<std::string> detail;
  if (k.ttm_pages_limit) {
    gpu_bytes = *k.ttm_pages_limit * kTtmPageBytes;
    const std::string mod = k.ttm_module.empty() ? "ttm module" : k.ttm_module;
    detail.push_back(mod + " pages_limit = " + std::to_string(*k.ttm_pages_limit) + " pages (" +
                     format_gib(gpu_bytes) + ")");
    if (k.ttm_page_pool_size) detail.push_back("page_pool_size = " + std::to_string(*k.ttm_page_pool_size));
    // In NPS1 each NUMA node's GPU gets limit / nodes (docs/rocm-runtime.md §2.1).
    if (!topo.numa.nodes.empty() && gpu_bytes < total.bytes) {
      const std::uint64_t share = gpu_bytes / topo.numa.nodes.size();
      for (const auto& n : topo.numa.nodes)
        detail.push_back("NUMA node " + std::to_string(n.os_index) + ": GPU share " + format_gib(share) + " of " +
                         format_gib(n.memory_total_bytes) + ", " + lost_text(n.memory_total_bytes, share));
    }
  } else {
    std::uint64_t with_gpus = 0;
    for (const auto& s : sockets) {
      if (s.gpu_agents.empty()) continue;
      ++with_gpus;
      gpu_bytes += s.gpu_allocatable_bytes;
      std::string line = socket_name(s) + ": GPU pools " + format_gib(s.gpu_allocatable_bytes);
      if (s.numa_node >= 0 && s.socket_memory_bytes > 0)
        line += " of " + format_gib(s.socket_memory_bytes) + ", " + lost_text(s.socket_memory_bytes, s.gpu_allocatable_bytes);
      detail.push_back(line);
    }
    if (with_gpus == 0 || gpu_bytes == 0)
      return not_checked("ttm-limit", "neither the TTM pages_limit nor GPU pool sizes are in the model");
    detail.insert(detail.begin(), "no TTM knobs in the model; inferred from the GPU pools (largest allocatable "
                                  "GLOBAL pool per GPU agent)");
  }
  detail.push_back("total memory " + total_text);
  const std::string evidence = join(detail, "; ");
  if (gpu_bytes >= total.bytes)
    return ok("ttm-limit", "the GPU may allocate all " + format_gib(total.bytes) + " of memory", evidence);
  return {"ttm-limit", severity::error,
          "the TTM page limit caps GPU allocations at " + format_gib(gpu_bytes) + " of " + format_gib(total.bytes) +
              ": " + format_gib(total.bytes - gpu_bytes) + " of memory is not GPU-allocatable",
          evidence, ttm_fix(k, ttm_pages_for(total.bytes))};
}

finding check_thp(const kernel_knobs& k) {
  if (!k.thp_enabled) return not_checked("thp-not-always", "no transparent hugepage setting in the model");
  std::string evidence = "/sys/kernel/mm/transparent_hugepage/enabled = " + *k.thp_enabled;
  if (k.thp_defrag) evidence += "; defrag = " + *k.thp_defrag;
  if (*k.thp_enabled == "always") return ok("thp-not-always", "transparent hugepages are always on", evidence);
  return {"thp-not-always", severity::warning,
          "transparent hugepages are not 'always': 4 KiB pages cut the GPU's TLB reach (about 15% slower kernels "
          "reported on MI300A)",
          evidence,
          "echo always > /sys/kernel/mm/transparent_hugepage/enabled; persist with transparent_hugepage=always "
          "on the kernel command line"};
}

finding check_numa_balancing(const kernel_knobs& k) {
  if (!k.numa_balancing) return not_checked("numa-balancing-on", "no kernel.numa_balancing value in the model");
  const std::string evidence = "/proc/sys/kernel/numa_balancing = " + std::to_string(*k.numa_balancing);
  if (*k.numa_balancing == 0) return ok("numa-balancing-on", "automatic NUMA balancing is off", evidence);
  return {"numa-balancing-on", severity::warning,
          "automatic NUMA balancing is on: the kernel migrates pages the GPU is using", evidence,
          "sysctl -w kernel.numa_balancing=0; persist with 'kernel.numa_balancing = 0' in /etc/sysctl.d/"};
}

finding check_compaction(const kernel_knobs& k) {
  if (!k.compaction_proactiveness && !k.compact_unevictable_allowed)
    return not_checked("compaction-off", "no vm.compaction_* values in the model");
  std::vector<std::string> evidence, fixes;
  if (k.compaction_proactiveness) {
    evidence.push_back("/proc/sys/vm/compaction_proactiveness = " + std::to_string(*k.compaction_proactiveness));
    if (*k.compaction_proactiveness == 0) fixes.push_back("sysctl -w vm.compaction_proactiveness=20");
  }
  if (k.compact_unevictable_allowed) {
    evidence.push_back("/proc/sys/vm/compact_unevictable_allowed = " + std::to_string(*k.compact_unevictable_allowed));
    if (*k.compact_unevictable_allowed == 0) fixes.push_back("sysctl -w vm.compact_unevictable_allowed=1");
  }
  if (fixes.empty()) return ok("compaction-off", "memory compaction is on", join(evidence, "; "));
  return {"compaction-off", severity::warning,
          "memory compaction is off: huge pages become scarce as memory fragments", join(evidence, "; "),
          join(fixes, "; ") + "; persist the same keys in /etc/sysctl.d/"};
}

finding check_iommu(const kernel_knobs& k) {
  if (k.iommu == iommu_mode::unknown) return not_checked("iommu-on", "the IOMMU mode is not in the model", k.iommu_evidence);
  std::string evidence = std::string("IOMMU ") + to_string(k.iommu);
  if (!k.iommu_evidence.empty()) evidence += " (" + k.iommu_evidence + ")";
  if (k.iommu != iommu_mode::translated) return ok("iommu-on", "the IOMMU is off or in passthrough", evidence);
  return {"iommu-on", severity::warning,
          "the IOMMU translates device addresses: GPU access to system memory pays for IOMMU translation", evidence,
          "boot with iommu=pt (passthrough), or turn the IOMMU off where no device needs it"};
}

finding check_gpu_locality(const topology& topo) {
  if (topo.gpu_numa.empty()) {
    if (topo.gpus().empty()) return not_checked("gpu-not-local", "no GPU in the model");
    return not_checked("gpu-not-local", "no GPU-to-NUMA mapping in the model");
  }
  std::vector<std::string> unbound, bound;
  for (const auto& b : topo.gpu_numa) {
    std::string gpu = "GPU KFD node " + std::to_string(b.gpu_kfd_node);
    if (const agent* a = topo.find_agent_by_kfd_node(b.gpu_kfd_node)) gpu += " (" + a->pci_address() + ")";
    const std::string how = " by " + b.method + (b.evidence.empty() ? "" : ": " + b.evidence);
    if (b.numa_node)
      bound.push_back(gpu + " -> NUMA node " + std::to_string(*b.numa_node) + how);
    else
      unbound.push_back(gpu + " is local to no NUMA node" + how);
  }
  if (unbound.empty()) return ok("gpu-not-local", "every mapped GPU is local to a NUMA node", join(bound, "; "));
  return {"gpu-not-local", severity::error,
          std::to_string(unbound.size()) + " GPU(s) local to no NUMA node: umem cannot place their memory on "
                                           "the right socket",
          join(unbound, "; "),
          "check /sys/bus/pci/devices/<PCI address>/numa_node (-1 means the firmware gave no proximity: "
          "update the BIOS and enable its NUMA/SRAT reporting); until then bind each process explicitly "
          "(numactl --cpunodebind=N --membind=N with the GPU's socket)"};
}

}  // namespace

const char* to_string(severity s) {
  switch (s) {
    case severity::info: return "info";
    case severity::warning: return "warning";
    case severity::error: return "error";
  }
  return "unknown";
}

std::uint64_t ttm_pages_for(std::uint64_t total_memory_bytes) {
  return (total_memory_bytes + kTtmPageBytes - 1) / kTtmPageBytes;
}

std::vector<finding> run_checks(const topology& topo) {
  return {check_xnack(topo),          check_ttm(topo),
          check_thp(topo.knobs),      check_numa_balancing(topo.knobs),
          check_compaction(topo.knobs), check_iommu(topo.knobs),
          check_gpu_locality(topo)};
}

std::string render_findings(const std::vector<finding>& findings) {
  std::vector<const finding*> order;
  for (const auto& f : findings) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(),
                   [](const finding* a, const finding* b) { return a->level > b->level; });
  std::ostringstream out;
  std::size_t counts[3] = {0, 0, 0};
  for (const finding* f : order) {
    ++counts[static_cast<int>(f->level)];
    out << to_string(f->level) << " [" << f->id << "] " << f->title << "\n";
    if (!f->evidence.empty()) out << "  evidence: " << f->evidence << "\n";
    if (!f->fix.empty()) out << "  fix: " << f->fix << "\n";
  }
  out << counts[2] << " error(s), " << counts[1] << " warning(s), " << counts[0] << " info\n";
  return out.str();
}

bool has_errors(const std::vector<finding>& findings) {
  return std::any_of(findings.begin(), findings.end(), [](const finding& f) { return f.level == severity::error; });
}

}  // namespace umem::umtopo
