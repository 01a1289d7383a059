#include "umem/hsa_runtime/rocr_handles.hpp"

namespace umem::hsa {

std::vector<rocr_agent> agents_of(const rocr_library& lib) {
  std::vector<rocr_agent> out;
  lib.check(lib.fn().hsa_iterate_agents(&collect_handle<rocr_agent>, &out), "hsa_iterate_agents");
  return out;
}

std::vector<rocr_pool> pools_of(const rocr_library& lib, rocr_agent agent) {
  std::vector<rocr_pool> out;
  lib.check(lib.fn().hsa_amd_agent_iterate_memory_pools(agent, &collect_handle<rocr_pool>, &out),
            "hsa_amd_agent_iterate_memory_pools");
  return out;
}

}  // namespace umem::hsa
