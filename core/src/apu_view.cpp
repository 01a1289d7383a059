#include "umem/core/apu_view.hpp"

#include <algorithm>
#include <map>

namespace umem {

namespace {

std::uint64_t largest_global_pool(const agent& a, bool allocatable_only) {
  std::uint64_t best = 0;
  for (const auto& p : a.pools)
    if (p.is_global() && (p.alloc_allowed || !allocatable_only)) best = std::max(best, p.size_bytes);
  return best;
}

// NUMA node of the i-th CPU agent (Note [Socket assembly]); nullopt when there are fewer NUMA
// nodes with CPUs than CPU agents.
std::vector<std::optional<int>> cpu_agent_nodes(const topology& topo, std::size_t cpu_count) {
  std::vector<int> nodes_with_cpus;
  for (const auto& n : topo.numa.nodes)
    if (!n.cpus.empty()) nodes_with_cpus.push_back(n.os_index);
  std::sort(nodes_with_cpus.begin(), nodes_with_cpus.end());
  std::vector<std::optional<int>> out(cpu_count);
  for (std::size_t i = 0; i < cpu_count; ++i) {
    if (topo.numa.nodes.empty())
      out[i] = static_cast<int>(i);
    else if (i < nodes_with_cpus.size())
      out[i] = nodes_with_cpus[i];
  }
  return out;
}

}  // namespace

std::uint64_t largest_allocatable_global_pool(const agent& a) { return largest_global_pool(a, true); }

std::vector<apu_socket> apu_sockets(const topology& topo) {
  std::map<int, apu_socket> by_node;
  apu_socket unplaced;
  auto socket_for = [&](int node) -> apu_socket& {
    auto& s = by_node[node];
    s.numa_node = node;
    return s;
  };
  for (const auto& n : topo.numa.nodes) socket_for(n.os_index);

  std::vector<const agent*> cpus = topo.cpus();
  std::stable_sort(cpus.begin(), cpus.end(),
                   [](const agent* a, const agent* b) { return a->kfd_node < b->kfd_node; });
  const auto cpu_nodes = cpu_agent_nodes(topo, cpus.size());
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    if (cpu_nodes[i])
      socket_for(*cpu_nodes[i]).cpu_agents.push_back(cpus[i]);
    else
      unplaced.cpu_agents.push_back(cpus[i]);
  }

  for (const agent* g : topo.gpus()) {
    const gpu_numa_binding* binding = nullptr;
    for (const auto& b : topo.gpu_numa)
      if (b.gpu_kfd_node == g->kfd_node) {
        binding = &b;
        break;
      }
    if (binding != nullptr && binding->numa_node)
      socket_for(*binding->numa_node).gpu_agents.push_back(g);
    else
      unplaced.gpu_agents.push_back(g);
  }

  std::vector<apu_socket> out;
  out.reserve(by_node.size() + 1);
  for (auto& [node, s] : by_node) out.push_back(std::move(s));
  if (!unplaced.cpu_agents.empty() || !unplaced.gpu_agents.empty()) out.push_back(std::move(unplaced));

  for (auto& s : out) {
    s.numa = s.numa_node >= 0 ? topo.find_numa_node(s.numa_node) : nullptr;
    if (s.numa != nullptr) {
      s.socket_memory_bytes = s.numa->memory_total_bytes;
    } else {
      // Each CPU agent is a different NUMA node, so their memories add up.
      for (const agent* c : s.cpu_agents) s.socket_memory_bytes += largest_global_pool(*c, false);
    }
    for (const agent* g : s.gpu_agents) s.gpu_allocatable_bytes += largest_allocatable_global_pool(*g);
  }
  return out;
}

}  // namespace umem
