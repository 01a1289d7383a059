// A fixture for allocator tests on the ROCr test double serving the real 4-socket MI300A
// rocminfo capture, completed with the real numactl capture's NUMA nodes and umem's GPU->NUMA
// bindings. The double logs every memory call; tests compare the log with what must happen.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"

namespace umem::alloc::test {

using umem::hsa::rocr_library;
using umem::test::scoped_env;

inline constexpr const char* kMi300aNumactl = "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt";
inline constexpr std::size_t kSegment = 2u << 20;

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

inline segment on_node(void* base, int node, coherence kind) {
  return segment{base, kSegment, node_binding{bind_mode::bind, {node}}, kind, true};
}

// The 4-socket MI300A served by the double, discovered through it and completed with NUMA nodes
// and GPU->NUMA bindings the way umem's live discovery completes it.
class GpuMapperDouble : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, umem::test::kMi300aRocminfo);
    UMEM_REQUIRE_FIXTURE(numactl, kMi300aNumactl);
    machine_ = umem::test::import_capture(rocminfo);
    numa_ = umem::importers::import_numactl(umem::test::read_text(numactl), numactl.string()).numa;
    buffer_.reset(new std::byte[kSegment]);
  }

  // XNACK on, as a test double may claim it: ROCr would report it (HSA_XNACK=1 before hsa_init)
  // through XNACK_ENABLED, SVM_ACCESSIBLE_BY_DEFAULT and the ISA suffix; the capture itself has
  // xnack- (capture line 366).
  void claim_xnack_on() {
    machine_.hsa.xnack_enabled = true;
    machine_.hsa.svm_accessible_by_default = true;  // what ROCr answers when every ISA is xnack+
    for (auto& a : machine_.agents)
      for (auto& isa : a.isas)
        if (auto pos = isa.find(":xnack-"); pos != std::string::npos)
          isa.replace(pos, 7, ":xnack+");
  }

  // The CPU agents' EXTENDED_SCOPE_FINE_GRAINED pools removed: what a runtime older than the host
  // ext-fine pool (ROCr commit 7f3dcd4e, Sep 2024; every 5.x) reports (docs/rocm-runtime.md §2).
  void drop_cpu_extended_fine_pools() {
    for (auto& a : machine_.agents)
      if (a.kind == umem::agent_kind::cpu)
        std::erase_if(a.pools, [](const umem::memory_pool& p) {
          return (p.global_flags & umem::pool_flag::extended_scope_fine_grained) != 0;
        });
  }

  void start(const char* double_path, const char* version,
             const std::function<void(umem::topology&)>& tweak = {}) {
    snap_env_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT",
                      umem::test::write_snapshot(dir_, machine_).string());
    ver_env_.emplace("UMEM_ROCR_DOUBLE_VERSION", version);
    path_ = double_path;
    lib_.emplace(rocr_library::load_from(std::vector<std::string>{double_path}));
    umem::hsa::discover_rocr(topo_, *lib_);
    ASSERT_EQ(topo_.hsa.state, umem::runtime_state::available) << topo_.hsa.state_reason;
    topo_.numa = numa_;
    topo_.gpu_numa = umem::numa::map_gpus_to_numa(topo_, nullptr);
    // GPU i sits on NUMA node i (fixtures README; rocm-smi --showtopo of the same class of node).
    ASSERT_EQ(topo_.gpu_numa.size(), 4u);
    for (std::size_t i = 0; i < 4; ++i) ASSERT_EQ(topo_.gpu_numa[i].numa_node, static_cast<int>(i));
    if (tweak) tweak(topo_);
    mapper_ = std::make_unique<rocr_gpu_mapper>(topo_, *lib_);
    umem::test::double_reset(path_);  // from here the log holds only the mapper's calls
  }

  std::string log() const { return umem::test::double_call_log(path_); }
  std::vector<std::string> take_log() {
    auto out = lines_of(log());
    umem::test::double_reset(path_);
    return out;
  }

  // Closes the mapper's session (the only one open): the double then names every leftover lock.
  std::string shut_down() {
    mapper_.reset();
    const std::string l = log();
    EXPECT_NE(l.find("hsa_shut_down -> SUCCESS refcount=0\n"), std::string::npos) << l;
    return l;
  }

  // map + unmap of `s` in lock mode must log exactly one lock of `pool` ("node0/3") for `gpus`
  // ("node4") and the unlock of that very lock.
  void expect_lock_cycle(const segment& s, const std::string& pool, const std::string& gpus) {
    mapper_->map(s);
    mapper_->unmap(s);
    const auto l = take_log();
    ASSERT_EQ(l.size(), 2u) << log();
    const std::regex lock("memory_lock_to_pool size=" + std::to_string(s.size) + " pool=" + pool +
                          " flags=0 agents=" + gpus + " -> SUCCESS (l[0-9]+)");
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l[0], m, lock)) << l[0];
    EXPECT_EQ(l[1], "memory_unlock " + m[1].str() + " -> SUCCESS");
  }

  umem::topology machine_;
  umem::numa_topology numa_;
  std::unique_ptr<std::byte[]> buffer_;  // segment memory: the double never dereferences it
  umem::test::temp_dir dir_;
  std::optional<scoped_env> snap_env_, ver_env_;
  const char* path_ = nullptr;
  std::optional<rocr_library> lib_;  // declared before mapper_: outlives it
  umem::topology topo_;
  std::unique_ptr<gpu_mapper> mapper_;
};

}  // namespace umem::alloc::test
