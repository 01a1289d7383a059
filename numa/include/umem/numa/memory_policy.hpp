// The kernel's NUMA memory calls the layers above make on a live machine, behind one interface:
// the calling thread's memory policy (set_mempolicy) and a node's free and total memory as libnuma
// reports it (numa_node_size64).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace umem::numa {

enum class policy_mode { bind, preferred };

// "bind" or "preferred"; throws umem::error(invalid_argument) naming `name` otherwise.
policy_mode parse_policy_mode(std::string_view name);

// Binds the calling thread's memory policy (and that of threads it creates later) to `node`:
// MPOL_BIND or MPOL_PREFERRED. Throws umem::error(invalid_argument) for a node outside the mask
// the call passes (1024 nodes) or when the kernel refuses, with its errno.
void set_thread_memory_policy(int node, policy_mode mode);

// {free, total} bytes of `node` as the kernel reports them; nullopt when it reports none.
std::optional<std::pair<std::uint64_t, std::uint64_t>> node_free_and_total(int node);

}  // namespace umem::numa
