#include "report.hpp"

#include "report_summary.hpp"
#include "report_text.hpp"

#include <cstdio>
#include <sstream>

#include "umem/core/apu_view.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/machine/gpu_memory_kind.hpp"

namespace umem::umtopo {

namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kGiB = kKiB * kKiB * kKiB;

std::string yes_no(std::optional<bool> v) {
  if (!v) return "unknown";
  return *v ? "yes" : "no";
}

void render_pools(std::ostringstream& out, const agent& a) {
  if (a.pools.empty()) {
    out << "    Pools: none in the model\n";
    return;
  }
  out << "    Pools:\n"
      << "      " << pad("segment", 9) << pad("coherence", 15) << pad("size", 27) << pad("alloc", 7)
      << pad("granule", 9) << pad("rec.granule", 13) << "accessible-by-all\n";
  for (const auto& p : a.pools) {
    // Exact KiB as rocminfo prints them, so the report can be checked against a dump.
    std::string size = std::to_string(p.size_bytes / kKiB) + " KiB";
    if (p.size_bytes >= kGiB) size += " (" + format_gib(p.size_bytes) + ")";
    const std::string rec = p.alloc_rec_granule ? format_exact_bytes(*p.alloc_rec_granule) : "unknown";
    out << "      " << pad(to_string(p.segment), 9) << pad(coherence_text(p), 15) << pad(size, 27)
        << pad(p.alloc_allowed ? "yes" : "no", 7) << pad(format_exact_bytes(p.alloc_granule), 9)
        << pad(rec, 13) << (p.accessible_by_all ? "yes" : "no") << "\n";
  }
}

std::string agent_title(const agent& a) {
  std::string t = a.name.empty() ? "(unnamed)" : a.name;
  if (!a.marketing_name.empty() && a.marketing_name != a.name) t += " (" + a.marketing_name + ")";
  return t;
}

void render_cuda_agent(std::ostringstream& out, const agent& a) {
  const cuda_device_info& c = *a.cuda;
  out << "    CUDA:  compute capability " << c.cc_major << "." << c.cc_minor << ", "
      << a.compute_units << " SMs, " << format_gib(c.total_memory_bytes) << " device memory\n";
  out << "    PCI:   " << a.pci_address() << "\n";
  const std::pair<const char*, const std::optional<bool>*> attrs[] = {
      {"pageable-memory-access", &c.pageable_memory_access},
      {"uses-host-page-tables", &c.pageable_memory_access_uses_host_page_tables},
      {"can-map-host-memory", &c.can_map_host_memory},
      {"host-register", &c.host_register_supported},
      {"host-pointer-for-registered-memory", &c.can_use_host_pointer_for_registered_mem},
      {"concurrent-managed-access", &c.concurrent_managed_access},
      {"direct-managed-access-from-host", &c.direct_managed_mem_access_from_host},
      {"integrated", &c.integrated}};
  out << "    unified memory:";
  const char* sep = " ";
  for (const auto& [name, value] : attrs) {
    out << sep << name << "=" << yes_no(*value);
    sep = ", ";
  }
  out << "\n    host NUMA node (driver): "
      << (c.host_numa_id ? std::to_string(*c.host_numa_id) : std::string("unknown")) << "\n";
  out << "    device memory: " << machine::to_string(machine::memory_kind_of(a)) << "\n";
}

void render_cpu_agent(std::ostringstream& out, const agent& a) {
  out << "  CPU agent, KFD node " << a.kfd_node << ": " << agent_title(a) << ", " << a.compute_units
      << " compute units\n";
  render_pools(out, a);
}

void render_gpu_agent(std::ostringstream& out, const agent& a) {
  out << "  GPU agent, " << agent_label(a) << ": " << agent_title(a) << "\n";
  if (a.cuda) {
    render_cuda_agent(out, a);
    return;
  }
  const auto xnack = a.isa_xnack();
  out << "    ISA:   " << (a.isas.empty() ? std::string("unknown") : a.isas.front());
  for (std::size_t i = 1; i < a.isas.size(); ++i) out << ", " << a.isas[i];
  out << "\n    XNACK: " << (xnack ? (*xnack ? "+" : "-") : "unknown (the ISA does not say)") << "\n";
  out << "    APU:   " << yes_no(a.is_apu) << " (coherent host access: " << yes_no(a.coherent_host_access)
      << ")\n";
  out << "    CUs:   " << a.compute_units << ", XCCs: "
      << (a.num_xcc ? std::to_string(*a.num_xcc) : std::string("unknown")) << "\n";
  out << "    PCI:   " << a.pci_address() << (a.pci_domain ? "" : " (domain not reported, 0 assumed)") << "\n";
  render_pools(out, a);
}

void render_socket(std::ostringstream& out, const apu_socket& s) {
  if (s.numa_node < 0)
    out << "Agents without a NUMA node\n";
  else
    out << "Socket on NUMA node " << s.numa_node << "\n";

  if (s.numa != nullptr)
    out << "  CPUs:   " << (s.numa->cpus.empty() ? std::string("none") : umem::detail::format_id_ranges(s.numa->cpus)) << " ("
        << s.numa->cpus.size() << " CPUs)\n";
  else if (s.numa_node >= 0)
    out << "  CPUs:   unknown (no NUMA data for this node)\n";

  if (s.numa != nullptr)
    out << "  Memory: " << format_gib(s.socket_memory_bytes) << " (NUMA node)\n";
  else if (s.socket_memory_bytes > 0)
    out << "  Memory: " << format_gib(s.socket_memory_bytes) << " (largest CPU agent pool; no NUMA data)\n";
  else if (s.numa_node >= 0)
    out << "  Memory: unknown\n";

  if (s.cpu_agents.empty() && s.numa_node >= 0) out << "  CPU agent: none in the model\n";
  for (const agent* c : s.cpu_agents) render_cpu_agent(out, *c);
  if (s.gpu_agents.empty() && s.numa_node >= 0) out << "  GPU agent: none bound to this node\n";
  for (const agent* g : s.gpu_agents) render_gpu_agent(out, *g);

  if (!s.gpu_agents.empty() && !(s.gpu_allocatable_bytes == 0 && s.gpu_agents.front()->cuda)) {
    out << "  GPU-allocatable: " << format_gib(s.gpu_allocatable_bytes);
    if (s.socket_memory_bytes > 0)
      out << " of " << format_gib(s.socket_memory_bytes) << " socket memory ("
          << percent(s.gpu_allocatable_bytes, s.socket_memory_bytes) << ")";
    out << "\n";
  }
  out << "\n";
}

void render_distances(std::ostringstream& out, const numa_topology& numa) {
  if (numa.nodes.empty()) {
    out << "NUMA distances: unknown (no NUMA data in the model)\n\n";
    return;
  }
  if (numa.distances.empty()) {
    out << "NUMA distances: unknown (not in the model)\n\n";
    return;
  }
  char buf[16];
  out << "NUMA distances\n  node";
  for (const auto& n : numa.nodes) {
    std::snprintf(buf, sizeof buf, "%5d", n.os_index);
    out << buf;
  }
  out << "\n";
  for (std::size_t i = 0; i < numa.distances.size(); ++i) {
    std::snprintf(buf, sizeof buf, "  %4d", i < numa.nodes.size() ? numa.nodes[i].os_index : -1);
    out << buf;
    for (auto d : numa.distances[i]) {
      std::snprintf(buf, sizeof buf, "%5u", d);
      out << buf;
    }
    out << "\n";
  }
  out << "\n";
}

void render_runtime(std::ostringstream& out, const hsa_system_info& hsa) {
  out << "Runtime: " << to_string(hsa.state);
  if (!hsa.state_reason.empty()) out << " (" << hsa.state_reason << ")";
  out << "\n";
  if (hsa.version_major && hsa.version_minor) {
    out << "  HSA version " << *hsa.version_major << "." << *hsa.version_minor;
    if (hsa.ext_version_major && hsa.ext_version_minor)
      out << ", AMD extension version " << *hsa.ext_version_major << "." << *hsa.ext_version_minor;
    out << "\n";
  }
  if (!hsa.library_path.empty()) out << "  library: " << hsa.library_path << "\n";
  const std::pair<const char*, const std::optional<bool>*> attrs[] = {
      {"xnack", &hsa.xnack_enabled},
      {"svm", &hsa.svm_supported},
      {"svm-accessible-by-default", &hsa.svm_accessible_by_default},
      {"virtual-memory-api", &hsa.virtual_mem_api_supported},
      {"dmabuf", &hsa.dmabuf_supported},
      {"mwaitx", &hsa.mwaitx_enabled}};
  std::string known;
  for (const auto& [name, value] : attrs)
    if (value->has_value()) known += std::string(known.empty() ? "" : ", ") + name + "=" + yes_no(**value);
  if (!known.empty()) out << "  system attributes: " << known << "\n";
}

// Only for a model that made a selection or probed CUDA (live discovery), so reports of captures
// are unchanged.
void render_backend(std::ostringstream& out, const topology& topo) {
  if (topo.gpu_backend.name.empty() && topo.cuda.state == runtime_state::not_probed) return;
  out << "GPU backend: "
      << (topo.gpu_backend.name.empty() ? std::string("not selected") : topo.gpu_backend.name);
  if (!topo.gpu_backend.reason.empty()) out << " (" << topo.gpu_backend.reason << ")";
  out << "\n";
  if (topo.cuda.state == runtime_state::not_probed) return;
  out << "  CUDA driver: " << to_string(topo.cuda.state);
  if (!topo.cuda.state_reason.empty()) out << " (" << topo.cuda.state_reason << ")";
  out << "\n";
  if (topo.cuda.driver_version)
    out << "  CUDA driver version " << *topo.cuda.driver_version / 1000 << "."
        << *topo.cuda.driver_version % 1000 / 10 << "\n";
  if (!topo.cuda.library_path.empty()) out << "  library: " << topo.cuda.library_path << "\n";
}

void render_mapping(std::ostringstream& out, const topology& topo) {
  const auto gpus = topo.gpus();
  if (gpus.empty()) return;
  out << "GPU to NUMA mapping\n";
  for (const agent* g : gpus) {
    out << "  GPU " << agent_label(*g) << ": ";
    const gpu_numa_binding* binding = nullptr;
    for (const auto& b : topo.gpu_numa)
      if (b.gpu_kfd_node == g->kfd_node) {
        binding = &b;
        break;
      }
    if (binding == nullptr) {
      out << "not mapped (no binding in the model)\n";
      continue;
    }
    if (binding->numa_node)
      out << "NUMA node " << *binding->numa_node;
    else
      out << "not local to any NUMA node";
    out << " by " << (binding->method.empty() ? std::string("an unnamed method") : binding->method);
    if (!binding->evidence.empty()) out << ": " << binding->evidence;
    out << "\n";
  }
}

}  // namespace

std::string format_gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return buf;
}

std::string format_exact_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (bytes != 0 && bytes % kKiB == 0 && u + 1 < std::size(units)) {
    bytes /= kKiB;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

std::string render_report(const topology& topo, report_detail detail) {
  if (detail == report_detail::summary) return render_summary(topo);
  std::ostringstream out;
  const auto sockets = apu_sockets(topo);
  const auto gpus = topo.gpus();
  out << headline(topo) << "\n";
  if (gpus.empty()) out << no_gpu_text(topo) << "\n";
  out << "\n";
  if (sockets.empty()) out << "No NUMA node and no agent in the model.\n\n";
  for (const auto& s : sockets) render_socket(out, s);
  render_distances(out, topo.numa);
  render_runtime(out, topo.hsa);
  render_backend(out, topo);
  out << "Sources: ";
  if (topo.sources.empty()) out << "none";
  for (std::size_t i = 0; i < topo.sources.size(); ++i) out << (i ? ", " : "") << topo.sources[i];
  out << "\n";
  render_mapping(out, topo);
  return out.str();
}

}  // namespace umem::umtopo
