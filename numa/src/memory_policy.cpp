#include "umem/numa/memory_policy.hpp"

#include <numa.h>
#include <numaif.h>

#include <cerrno>
#include <string>

#include "umem/core/error.hpp"

namespace umem::numa {

policy_mode parse_policy_mode(std::string_view name) {
  if (name == "bind") return policy_mode::bind;
  if (name == "preferred") return policy_mode::preferred;
  throw_error(errc::invalid_argument,
              "memory policy mode '" + std::string(name) + "' is not one of bind, preferred");
}

void set_thread_memory_policy(int node, policy_mode mode) {
  constexpr unsigned long bits = 8 * sizeof(unsigned long);
  constexpr unsigned long words = 16;
  if (node < 0 || static_cast<unsigned long>(node) >= words * bits)
    throw_error(errc::invalid_argument,
                "memory policy: NUMA node " + std::to_string(node) + " is out of range");
  unsigned long mask[words] = {};
  const auto n = static_cast<unsigned long>(node);
  mask[n / bits] = 1UL << (n % bits);
  const bool bind = mode == policy_mode::bind;
  if (set_mempolicy(bind ? MPOL_BIND : MPOL_PREFERRED, mask, words * bits) != 0)
    throw_errno(errc::invalid_argument,
                std::string("set_mempolicy(") + (bind ? "bind" : "preferred") + ", node " +
                    std::to_string(node) + ")",
                errno);
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> node_free_and_total(int node) {
  long long free_bytes = 0;
  const long long total = numa_node_size64(node, &free_bytes);
  if (total < 0) return std::nullopt;
  return std::pair{static_cast<std::uint64_t>(free_bytes), static_cast<std::uint64_t>(total)};
}

}  // namespace umem::numa
