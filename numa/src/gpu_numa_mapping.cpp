#include "umem/numa/gpu_numa_mapping.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::numa {
namespace {

// MI300A's GPU PCI device id; ROCr 6.1 sets "APU" from this id (docs/rocm-runtime.md §1.1).
constexpr std::uint32_t mi300a_chip_id = 0x74A0;

// A decided node, or why the method could not decide (the reason feeds "none" evidence).
struct attempt {
  std::optional<int> node;
  std::string text;  // evidence when node is set, reason otherwise
};

attempt decided(int node, std::string evidence) { return {node, std::move(evidence)}; }
attempt failed(std::string reason) { return {std::nullopt, std::move(reason)}; }


// KFD CPU node -> NUMA node (see the header): the i-th NUMA node that has CPUs.
attempt kfd_cpu_to_numa(const topology& topo, std::uint32_t kfd_cpu) {
  if (topo.numa.nodes.empty())
    return decided(static_cast<int>(kfd_cpu),
                   "no NUMA nodes known, so KFD CPU node " + std::to_string(kfd_cpu) +
                       " is assumed to be NUMA node " + std::to_string(kfd_cpu));
  std::uint32_t seen = 0;
  for (const auto& n : topo.numa.nodes) {
    if (n.cpus.empty()) continue;
    if (seen++ == kfd_cpu)
      return decided(n.os_index, "KFD CPU node " + std::to_string(kfd_cpu) + " is NUMA node " +
                                     std::to_string(n.os_index) + " (index " +
                                     std::to_string(kfd_cpu) + " among NUMA nodes with CPUs)");
  }
  return failed("KFD CPU node " + std::to_string(kfd_cpu) + " has no NUMA node: only " +
                std::to_string(seen) + " NUMA nodes have CPUs");
}

attempt with_translation(const topology& topo, std::uint32_t kfd_cpu, const std::string& how) {
  attempt t = kfd_cpu_to_numa(topo, kfd_cpu);
  return {t.node, how + "; " + t.text};
}

attempt by_nearest_cpu(const topology& topo, const agent& gpu) {
  if (!gpu.nearest_cpu_kfd_node) return failed("ROCr gave no NEAREST_CPU");
  return with_translation(
      topo, *gpu.nearest_cpu_kfd_node,
      "ROCr NEAREST_CPU is KFD node " + std::to_string(*gpu.nearest_cpu_kfd_node));
}

bool is_cpu_kfd_node(const topology& topo, std::uint32_t id) {
  for (const auto& n : topo.kfd_nodes)
    if (n.id == id) return !n.is_gpu();
  const agent* a = topo.find_agent_by_kfd_node(id);
  return a != nullptr && a->kind == agent_kind::cpu;
}

attempt by_io_link(const topology& topo, const agent& gpu) {
  const auto node = std::find_if(topo.kfd_nodes.begin(), topo.kfd_nodes.end(),
                                 [&](const kfd_node& n) { return n.id == gpu.kfd_node; });
  if (node == topo.kfd_nodes.end())
    return failed("the topology has no KFD sysfs node " + std::to_string(gpu.kfd_node));
  const kfd_io_link* best = nullptr;
  bool tie = false;
  for (const auto& l : node->io_links) {
    if (l.node_from != gpu.kfd_node || !is_cpu_kfd_node(topo, l.node_to)) continue;
    if (best == nullptr || l.weight < best->weight) {
      best = &l;
      tie = false;
    } else if (l.weight == best->weight) {
      tie = true;
    }
  }
  if (best == nullptr)
    return failed("KFD node " + std::to_string(gpu.kfd_node) + " has no io_link to a CPU node");
  // Two equally near CPU nodes name no single local node; leave it to the next method.
  if (tie)
    return failed("KFD node " + std::to_string(gpu.kfd_node) +
                  " has io_links of equal lowest weight " + std::to_string(best->weight) +
                  " to several CPU nodes");
  return with_translation(topo, best->node_to,
                          "KFD io_link " + std::to_string(gpu.kfd_node) + "->" +
                              std::to_string(best->node_to) + " (type " +
                              std::to_string(best->type) + ", weight " +
                              std::to_string(best->weight) + ") is its lowest-weight CPU link");
}

// A sysfs cpumask ("ffffffff,00000000,..."), 32-bit hex words, most significant first.
std::optional<std::vector<unsigned>> parse_cpumask(const std::string& text) {
  std::vector<std::uint32_t> words;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::uint32_t w = 0;
    const auto r = std::from_chars(text.data() + start, text.data() + end, w, 16);
    if (r.ec != std::errc() || r.ptr != text.data() + end) return std::nullopt;
    words.push_back(w);
    start = end + 1;
  }
  std::vector<unsigned> cpus;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::uint32_t w = words[words.size() - 1 - i];
    for (unsigned b = 0; b < 32; ++b)
      if ((w >> b) & 1u) cpus.push_back(static_cast<unsigned>(i * 32 + b));
  }
  return cpus;
}

attempt by_pci_sysfs(const topology& topo, const agent& gpu, const fs_root* root) {
  if (root == nullptr) return failed("no PCI sysfs root was given");
  // bdfid 0 is the host bridge's address; rocminfo prints 0 when it does not know.
  if (gpu.bdfid == 0) return failed("the agent has no PCI address (BDFID 0)");
  const std::string dir = "/sys/bus/pci/devices/" + gpu.pci_address();
  const auto numa_text = root->read_line(dir + "/numa_node");
  const auto cpus_text = root->read_line(dir + "/local_cpus");
  if (!numa_text && !cpus_text) return failed("no " + root->resolve(dir + "/numa_node").string());

  int node = -1;
  if (numa_text) {
    const auto r = std::from_chars(numa_text->data(), numa_text->data() + numa_text->size(), node);
    if (r.ec != std::errc() || r.ptr != numa_text->data() + numa_text->size())
      return failed(root->resolve(dir + "/numa_node").string() + " holds '" + *numa_text +
                    "', not a number");
  }
  if (node >= 0) {
    if (!topo.numa.nodes.empty() && topo.find_numa_node(node) == nullptr)
      return failed(root->resolve(dir + "/numa_node").string() + " names NUMA node " +
                    std::to_string(node) + ", which the topology does not have");
    return decided(node, root->resolve(dir + "/numa_node").string() + " is " +
                             std::to_string(node) +
                             (cpus_text ? " (local_cpus " + *cpus_text + ")" : std::string()));
  }
  // numa_node -1 (firmware gave no proximity): local_cpus can still name exactly one node.
  const auto cpus = cpus_text ? parse_cpumask(*cpus_text) : std::nullopt;
  if (cpus && !cpus->empty())
    for (const auto& n : topo.numa.nodes)
      if (n.cpus == *cpus)
        return decided(n.os_index, root->resolve(dir + "/local_cpus").string() + " (" +
                                       umem::detail::format_id_ranges(*cpus) + ") is exactly NUMA node " +
                                       std::to_string(n.os_index) + "'s CPUs");
  return failed(root->resolve(dir).string() + " gives no affinity (numa_node " +
                numa_text.value_or("absent") + ", local_cpus " + cpus_text.value_or("absent") +
                " matching no single NUMA node)");
}

using umem::detail::hex;

bool is_apu(const agent& a) { return a.is_apu.value_or(false) || a.chip_id == mi300a_chip_id; }

std::vector<const agent*> by_kfd_id(std::vector<const agent*> v) {
  std::sort(v.begin(), v.end(),
            [](const agent* a, const agent* b) { return a->kfd_node < b->kfd_node; });
  return v;
}

attempt by_kfd_order(const topology& topo, const agent& gpu) {
  const auto gpus = by_kfd_id(topo.gpus());
  const auto cpus = by_kfd_id(topo.cpus());
  if (gpus.size() != cpus.size())
    return failed("needs one GPU agent per CPU agent (" + std::to_string(cpus.size()) + " CPU, " +
                  std::to_string(gpus.size()) + " GPU agents)");
  for (const agent* g : gpus)
    if (!is_apu(*g))
      return failed("needs every GPU to be an APU; KFD node " + std::to_string(g->kfd_node) +
                    " is not (no APU memory property, chip id " + hex(g->chip_id) + ")");
  const auto i = static_cast<std::size_t>(std::find(gpus.begin(), gpus.end(), &gpu) - gpus.begin());
  return with_translation(topo, cpus[i]->kfd_node,
                          "assumed: on an APU machine with one GPU per CPU agent, GPU " +
                              std::to_string(i) + " (KFD node " + std::to_string(gpu.kfd_node) +
                              ") shares a socket with CPU agent " + std::to_string(i) +
                              " (KFD node " + std::to_string(cpus[i]->kfd_node) + ")");
}

gpu_numa_binding bind(const topology& topo, const agent& gpu, const fs_root* pci_root) {
  gpu_numa_binding b;
  b.gpu_kfd_node = gpu.kfd_node;
  // Lazily, in order of trust: a lower method never runs (or reads sysfs) once one decided.
  const std::pair<const char*, std::function<attempt()>> methods[] = {
      {"rocr-nearest-cpu", [&] { return by_nearest_cpu(topo, gpu); }},
      {"kfd-io-link", [&] { return by_io_link(topo, gpu); }},
      {"pci-sysfs", [&] { return by_pci_sysfs(topo, gpu, pci_root); }},
      {"kfd-order", [&] { return by_kfd_order(topo, gpu); }},
  };
  std::string reasons;
  for (const auto& [method, run] : methods) {
    attempt a = run();
    if (a.node) {
      b.numa_node = a.node;
      b.method = method;
      b.evidence = std::move(a.text);
      break;
    }
    reasons += std::string(reasons.empty() ? "" : "; ") + method + ": " + a.text;
  }
  if (!b.numa_node) {
    b.method = "none";
    b.evidence = "GPU KFD node " + std::to_string(gpu.kfd_node) +
                 " is not local to any known NUMA node: " + reasons;
  }
  log().debug("GPU KFD node {} -> NUMA {} by {}: {}", gpu.kfd_node,
              b.numa_node ? std::to_string(*b.numa_node) : "none", b.method, b.evidence);
  return b;
}

}  // namespace

std::vector<gpu_numa_binding> map_gpus_to_numa(const topology& topo, const fs_root* pci_root) {
  std::vector<gpu_numa_binding> out;
  for (const agent* g : topo.gpus()) out.push_back(bind(topo, *g, pci_root));
  return out;
}

}  // namespace umem::numa
