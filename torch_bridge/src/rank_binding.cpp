#include "umem/torch_bridge/rank_binding.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "umem/core/apu_view.hpp"
#include "umem/core/error.hpp"

namespace umem::torch_bridge {
namespace {

struct slot {
  int numa_node = -1;
  const umem::numa_node* numa = nullptr;
  const agent* gpu = nullptr;
};

int device_index(const topology& topo, const agent* gpu) {
  if (gpu->cuda) return static_cast<int>(gpu->cuda->ordinal);
  const auto gpus = topo.gpus();
  return static_cast<int>(std::find(gpus.begin(), gpus.end(), gpu) - gpus.begin());
}

}  // namespace

rank_binding bind_rank(const topology& topo, int local_rank, int local_size) {
  if (local_rank < 0 || local_size < 0 || (local_size > 0 && local_rank >= local_size))
    throw_error(errc::invalid_argument, "bind_rank: local rank " + std::to_string(local_rank) +
                                            " is not in [0, local size " +
                                            std::to_string(local_size) + ")");
  std::vector<slot> slots;
  for (const apu_socket& s : apu_sockets(topo)) {
    if (s.numa_node < 0) continue;  // GPUs of no known node cannot be bound to
    for (const agent* g : s.gpu_agents) slots.push_back({s.numa_node, s.numa, g});
  }
  const bool have_gpus = !slots.empty();
  if (!have_gpus)
    for (const numa_node& n : topo.numa.nodes)
      if (!n.cpus.empty()) slots.push_back({n.os_index, &n, nullptr});
  if (slots.empty())
    throw_error(errc::invalid_argument,
                "bind_rank: the topology has neither GPUs bound to NUMA nodes nor NUMA nodes with "
                "CPUs; nothing to bind to");

  rank_binding b;
  b.local_rank = local_rank;
  b.local_size = local_size;
  b.slots = static_cast<int>(slots.size());
  const std::string what = have_gpus ? " GPU slots" : " NUMA nodes (no GPUs in the model)";
  if (local_size > b.slots && local_size % b.slots == 0) {
    const int per_slot = local_size / b.slots;
    b.slot = local_rank / per_slot;
    b.evidence = std::to_string(local_size) + " local ranks over " + std::to_string(b.slots) +
                 what + ": " + std::to_string(per_slot) + " consecutive ranks per slot";
  } else {
    b.slot = local_rank % b.slots;
    b.evidence = "local rank " + std::to_string(local_rank) + " modulo " +
                 std::to_string(b.slots) + what;
  }
  const slot& s = slots[static_cast<std::size_t>(b.slot)];
  b.numa_node = s.numa_node;
  if (s.numa != nullptr) b.cpus = s.numa->cpus;
  if (s.gpu != nullptr) {
    b.device = device_index(topo, s.gpu);
    b.gpu_kfd_node = s.gpu->kfd_node;
    b.evidence += "; GPU KFD node " + std::to_string(s.gpu->kfd_node) + " is on NUMA node " +
                  std::to_string(s.numa_node);
  }
  return b;
}

std::string to_json(const rank_binding& b) {
  nlohmann::json j;
  j["local_rank"] = b.local_rank;
  j["local_size"] = b.local_size;
  j["slot"] = b.slot;
  j["slots"] = b.slots;
  j["numa_node"] = b.numa_node;
  j["cpus"] = b.cpus;
  j["device"] = b.device;
  j["gpu_kfd_node"] = b.gpu_kfd_node ? nlohmann::json(*b.gpu_kfd_node) : nlohmann::json(nullptr);
  j["evidence"] = b.evidence;
  return j.dump();
}

}  // namespace umem::torch_bridge
