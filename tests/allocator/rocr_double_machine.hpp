// The allocator suites' live machine over the ROCr double (tests/rocr_double): the machine it
// serves as ROCr discovers it, the ROCr backend selected as production selects it, and this
// machine's NUMA nodes with every GPU on the first node with CPUs (the served machine's nodes are
// not this machine's).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::test {

// Every GPU of `t` on the first NUMA node with CPUs of this machine.
inline void bind_gpus_to_first_node(topology& t) {
  int node = 0;
  for (const auto& n : t.numa.nodes)
    if (!n.cpus.empty()) {
      node = n.os_index;
      break;
    }
  for (const agent* g : t.gpus()) t.gpu_numa.push_back({g->kfd_node, node, "test", "first node"});
}

// Serves a machine through the ROCr double at `path` as ROCr `version`; the snapshot, the
// environment and the loaded library live as long as this object.
class rocr_double_machine {
 public:
  machine::live_machine serve(const topology& served, const char* path, const char* version) {
    path_ = path;
    snap_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT", write_snapshot(dir_, served).string());
    ver_.emplace("UMEM_ROCR_DOUBLE_VERSION", version);
    lib_ = std::make_shared<const hsa::rocr_library>(
        hsa::rocr_library::load_from(std::vector<std::string>{path}));
    machine::live_machine m;
    hsa::discover_rocr(m.topo, *lib_);
    EXPECT_EQ(m.topo.hsa.state, runtime_state::available) << m.topo.hsa.state_reason;
    m.rocr = lib_;
    m.runtime = machine::select_gpu_runtime(m.topo, machine::gpu_runtime_request::rocr, lib_, {});
    EXPECT_EQ(m.runtime->kind(), machine::gpu_runtime_kind::rocr) << m.topo.gpu_backend.reason;
    m.topo.numa = numa::load_hwloc_live();
    bind_gpus_to_first_node(m.topo);
    return m;
  }
  const std::shared_ptr<const hsa::rocr_library>& library() const { return lib_; }
  const char* path() const { return path_; }

 private:
  temp_dir dir_;
  std::optional<scoped_env> snap_, ver_;
  const char* path_ = nullptr;
  std::shared_ptr<const hsa::rocr_library> lib_;
};

}  // namespace umem::test
