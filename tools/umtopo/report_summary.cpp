#include "report_summary.hpp"

#include <algorithm>
#include <sstream>

#include "report.hpp"
#include "report_text.hpp"
#include "umem/core/apu_view.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::umtopo {
namespace {

using umem::detail::format_id_ranges;
using umem::detail::join;

// "gfx942" of "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"; "sm_90" for a CUDA device.
std::string short_isa(const agent& a) {
  if (a.cuda) return "sm_" + std::to_string(a.cuda->cc_major) + std::to_string(a.cuda->cc_minor);
  if (a.isas.empty()) return "?";
  std::string isa = a.isas.front();
  if (const auto dash = isa.rfind("--"); dash != std::string::npos) isa.erase(0, dash + 2);
  return isa.substr(0, isa.find(':'));
}

std::string xnack_text(const agent& a) {
  const auto x = a.isa_xnack();
  return x ? (*x ? "+" : "-") : "?";
}

std::string apu_text(const agent& a) {
  if (!a.is_apu) return "?";
  return *a.is_apu ? "yes" : "no";
}

struct columns {
  std::string numa, cpus, memory, gpu, isa, xnack, apu, pci, allocatable;
};

void print_row(std::ostringstream& out, const columns& c) {
  std::string line = pad(c.numa, 5) + pad(c.cpus, 20) + pad(c.memory, 12) + pad(c.gpu, 9) + pad(c.isa, 8) +
                     pad(c.xnack, 6) + pad(c.apu, 4) + pad(c.pci, 14) + c.allocatable;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  out << line << "\n";
}

void render_table(std::ostringstream& out, const std::vector<apu_socket>& sockets) {
  print_row(out, {"NUMA", "CPUs", "memory", "GPU", "ISA", "XNACK", "APU", "PCI", "GPU-allocatable"});
  bool pool_memory = false;
  for (const auto& s : sockets) {
    columns c;
    c.numa = s.numa_node >= 0 ? std::to_string(s.numa_node) : "none";
    if (s.numa != nullptr)
      c.cpus = s.numa->cpus.empty() ? "none" : format_id_ranges(s.numa->cpus) + " (" + std::to_string(s.numa->cpus.size()) + ")";
    else
      c.cpus = s.numa_node >= 0 ? "unknown" : "-";
    if (s.socket_memory_bytes > 0) c.memory = format_gib(s.socket_memory_bytes) + (s.numa == nullptr ? "*" : "");
    else c.memory = s.numa_node >= 0 ? "unknown" : "-";
    pool_memory = pool_memory || (s.numa == nullptr && s.socket_memory_bytes > 0);
    if (s.gpu_agents.empty()) {
      c.gpu = "-";
      print_row(out, c);
      continue;
    }
    for (std::size_t i = 0; i < s.gpu_agents.size(); ++i) {
      const agent& g = *s.gpu_agents[i];
      c.gpu = g.cuda ? "CUDA " + std::to_string(g.cuda->ordinal) : "KFD " + std::to_string(g.kfd_node);
      c.isa = short_isa(g);
      c.xnack = g.cuda ? "n/a" : xnack_text(g);
      c.apu = apu_text(g);
      c.pci = g.pci_address();
      c.allocatable.clear();
      // One value per socket: its GPU agents share the socket's memory (platform.md, partitions).
      if (i == 0 && !(s.gpu_allocatable_bytes == 0 && g.cuda)) {
        c.allocatable = format_gib(s.gpu_allocatable_bytes);
        if (s.socket_memory_bytes > 0) c.allocatable += " (" + percent(s.gpu_allocatable_bytes, s.socket_memory_bytes) + ")";
      }
      print_row(out, c);
      c = columns{};
    }
  }
  if (pool_memory) out << "* memory of the largest CPU agent pool: the model has no NUMA data\n";
}

// The pools of one agent without their sizes ("coarse, extended_fine, fine; group"), and sizes.
struct pool_shape {
  std::string kinds;
  std::uint64_t global_min = 0, global_max = 0;
  std::vector<std::uint64_t> group_sizes;
};

pool_shape shape_of(const agent& a) {
  pool_shape p;
  std::vector<std::string> global;
  for (const auto& pool : a.pools) {
    if (!pool.is_global()) {
      p.group_sizes.push_back(pool.size_bytes);
      continue;
    }
    global.push_back(coherence_text(pool));
    p.global_min = global.size() == 1 ? pool.size_bytes : std::min(p.global_min, pool.size_bytes);
    p.global_max = std::max(p.global_max, pool.size_bytes);
  }
  p.kinds = join(global, ", ");
  return p;
}

std::string size_range(std::uint64_t lo, std::uint64_t hi) {
  if (format_gib(lo) == format_gib(hi)) return format_gib(lo);
  return format_gib(lo).substr(0, format_gib(lo).size() - 4) + "-" + format_gib(hi);
}

// Agents of one kind grouped by the pools they have, sizes as a range over the group.
void render_pools(std::ostringstream& out, const std::vector<const agent*>& agents, const char* kind) {
  std::vector<std::pair<std::string, std::vector<const agent*>>> groups;
  for (const agent* a : agents) {
    if (a->cuda) continue;  // device memory, not pools (--verbose)
    const pool_shape p = shape_of(*a);
    std::string key = p.kinds + "|" + std::to_string(p.group_sizes.size());
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(a);
  }
  for (const auto& [key, members] : groups) {
    std::vector<std::uint32_t> nodes;
    std::uint64_t lo = ~0ull, hi = 0;
    std::vector<std::uint64_t> group_sizes;
    for (const agent* a : members) {
      nodes.push_back(a->kfd_node);
      const pool_shape p = shape_of(*a);
      if (!p.kinds.empty()) lo = std::min(lo, p.global_min), hi = std::max(hi, p.global_max);
      group_sizes.insert(group_sizes.end(), p.group_sizes.begin(), p.group_sizes.end());
    }
    const pool_shape first = shape_of(*members.front());
    out << "  " << kind << (members.size() == 1 ? " agent, KFD node " : " agents, KFD nodes ") << format_id_ranges(nodes)
        << ": ";
    if (first.kinds.empty() && group_sizes.empty()) {
      out << "no pools in the model\n";
      continue;
    }
    if (!first.kinds.empty()) out << first.kinds << " " << size_range(lo, hi);
    if (!group_sizes.empty()) {
      const auto [gmin, gmax] = std::minmax_element(group_sizes.begin(), group_sizes.end());
      out << (first.kinds.empty() ? "" : "; ") << "group " << format_exact_bytes(*gmin)
          << (*gmin == *gmax ? "" : "-" + format_exact_bytes(*gmax));
    }
    out << "\n";
  }
}

void render_distances(std::ostringstream& out, const numa_topology& numa) {
  if (numa.nodes.empty()) return;  // the table already says there is no NUMA data
  if (numa.distances.empty()) {
    out << "NUMA distances: unknown (not in the model)\n";
    return;
  }
  std::optional<std::uint32_t> local, remote;
  bool uniform = true;
  for (std::size_t i = 0; i < numa.distances.size(); ++i)
    for (std::size_t j = 0; j < numa.distances[i].size(); ++j) {
      auto& want = i == j ? local : remote;
      if (!want) want = numa.distances[i][j];
      uniform = uniform && *want == numa.distances[i][j];
    }
  if (uniform) {
    out << "NUMA distances: " << *local << " local";
    if (remote) out << ", " << *remote << " remote";
    out << "\n";
    return;
  }
  std::vector<std::string> rows;
  for (const auto& row : numa.distances) {
    std::vector<std::string> cells;
    for (auto d : row) cells.push_back(std::to_string(d));
    rows.push_back(join(cells, " "));
  }
  out << "NUMA distances (a row per node): " << join(rows, " / ") << "\n";
}

void render_mapping(std::ostringstream& out, const topology& topo) {
  const auto gpus = topo.gpus();
  if (gpus.empty()) return;
  // Grouped by outcome, so four GPUs placed alike take one clause.
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> groups;
  for (const agent* g : gpus) {
    const auto it = std::find_if(topo.gpu_numa.begin(), topo.gpu_numa.end(),
                                 [&](const gpu_numa_binding& b) { return b.gpu_kfd_node == g->kfd_node; });
    const std::string outcome = it == topo.gpu_numa.end() ? "not mapped"
                                : !it->numa_node          ? "local to no NUMA node"
                                                          : "by " + (it->method.empty() ? std::string("an unnamed method") : it->method);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& e) { return e.first == outcome; });
    if (group == groups.end()) group = groups.insert(groups.end(), {outcome, {}});
    group->second.push_back(g->kfd_node);
  }
  std::vector<std::string> parts;
  for (const auto& [outcome, nodes] : groups)
    parts.push_back(std::string(nodes.size() == 1 ? "KFD node " : "KFD nodes ") + format_id_ranges(nodes) + " " + outcome);
  out << "GPU to NUMA: " << join(parts, "; ") << "\n";
}

void render_runtime(std::ostringstream& out, const topology& topo) {
  const std::string no_gpu = no_gpu_text(topo);
  if (!no_gpu.empty()) {
    out << no_gpu << "\n";
  } else {
    out << "Runtime: " << to_string(topo.hsa.state);
    // An import's reason names the file, which Sources already does.
    if (!topo.hsa.state_reason.empty() && topo.hsa.state != runtime_state::imported)
      out << " (" << topo.hsa.state_reason << ")";
    if (topo.hsa.version_major && topo.hsa.version_minor)
      out << ", HSA " << *topo.hsa.version_major << "." << *topo.hsa.version_minor;
    out << "\n";
  }
  // Without a GPU, a backend of "none" only repeats the line above.
  const auto& b = topo.gpu_backend;
  if (!b.name.empty() && (no_gpu.empty() || b.name != "none"))
    out << "GPU backend: " << b.name << (b.reason.empty() ? "" : " (" + b.reason + ")") << "\n";
}

}  // namespace

std::string render_summary(const topology& topo) {
  std::ostringstream out;
  out << headline(topo) << "\n";
  render_runtime(out, topo);
  out << "\n";
  const auto sockets = apu_sockets(topo);
  if (sockets.empty())
    out << "No NUMA node and no agent in the model.\n";
  else
    render_table(out, sockets);
  if (!topo.agents.empty()) {
    out << "\nPools (views of the same memory: never add them up)\n";
    render_pools(out, topo.cpus(), "CPU");
    render_pools(out, topo.gpus(), "GPU");
  }
  out << "\n";
  render_distances(out, topo.numa);
  render_mapping(out, topo);
  out << "Sources: " << (topo.sources.empty() ? "none" : join(topo.sources, ", ")) << "\n";
  out << "More: umtopo --verbose (every agent, pool and piece of evidence); umtopo check (what to fix)\n";
  return out.str();
}

}  // namespace umem::umtopo
