// Which APU a local rank belongs to: its NUMA node, that node's CPUs and the GPU bound to it,
// computed from the topology model only (so a replayed capture gives the answer for that machine).
//
// Note [Ranks to APUs]
// The slots are the GPUs bound to a NUMA node (apu_sockets: ascending node, then HSA order), one
// slot per GPU agent, so a TPX socket offers three. With `local_size` ranks on the node:
//  * local_size a multiple of the slot count (and larger): consecutive ranks share a slot,
//    rank r -> slot r / (local_size / slots), keeping neighbours on one socket;
//  * otherwise rank r -> slot r % slots.
// Without GPUs in the model, the slots are the NUMA nodes with CPUs and the device is -1. CPUs are
// the whole socket's: ranks sharing a socket share its CPUs (split them with the launcher if
// wanted). The device is the GPU's index in the topology's GPU order, which is PyTorch's device
// index when no *_VISIBLE_DEVICES variable reorders or hides GPUs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::torch_bridge {

struct rank_binding {
  int local_rank = 0;
  int local_size = 0;  // 0: unknown
  int slot = 0;
  int slots = 0;
  int numa_node = -1;
  std::vector<unsigned> cpus;
  int device = -1;                         // -1: no GPU in the model
  std::optional<std::uint32_t> gpu_kfd_node;
  std::string evidence;  // one sentence: how the slot was chosen
};

// Throws umem::error(invalid_argument) for a negative rank, a rank >= local_size, or a model
// without NUMA nodes.
rank_binding bind_rank(const topology& topo, int local_rank, int local_size);

// {"local_rank","local_size","slot","slots","numa_node","cpus":[..],"device","gpu_kfd_node",
//  "evidence"}
std::string to_json(const rank_binding& b);

}  // namespace umem::torch_bridge
