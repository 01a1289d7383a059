#include "report_text.hpp"

#include <cstdio>

namespace umem::umtopo {

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string coherence_text(const memory_pool& p) {
  if (!p.is_global()) return "-";
  std::string c = to_string(p.coherence_kind());
  if (p.is_kernarg()) c += "+kernarg";
  return c;
}

// CUDA agents are named by their device ordinal; kfd_node is only their model key.
std::string agent_label(const agent& a) {
  if (a.cuda) return "CUDA device " + std::to_string(a.cuda->ordinal);
  return "KFD node " + std::to_string(a.kfd_node);
}

std::string default_reason(runtime_state s) {
  switch (s) {
    case runtime_state::not_probed: return "no GPU runtime was probed";
    case runtime_state::no_library: return "libhsa-runtime64 could not be loaded";
    case runtime_state::no_driver: return "the amdgpu/KFD driver is absent";
    case runtime_state::init_failed: return "hsa_init failed";
    case runtime_state::available:
    case runtime_state::imported: break;  // the reports word these themselves
  }
  return "unknown";
}

namespace {

std::string count(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace

std::string headline(const topology& topo) {
  std::string h = "umtopo: " + count(topo.numa.nodes.size(), "NUMA node") + ", " + count(topo.cpus().size(), "CPU agent") +
                  ", " + count(topo.gpus().size(), "GPU agent");
  if (!topo.hostname.empty()) h += " on " + topo.hostname;
  return h;
}

std::string no_gpu_text(const topology& topo) {
  if (!topo.gpus().empty()) return {};
  const bool runtime_ran = topo.hsa.state == runtime_state::available || topo.hsa.state == runtime_state::imported;
  if (runtime_ran) return std::string("no AMD GPU agent: the runtime (") + to_string(topo.hsa.state) + ") reports none";
  return "no AMD GPU runtime: " + (topo.hsa.state_reason.empty() ? default_reason(topo.hsa.state) : topo.hsa.state_reason);
}

}  // namespace umem::umtopo
