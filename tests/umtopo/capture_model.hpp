// The 4-socket MI300A model the umtopo tests share, built from real captures by the importers.
#pragma once

#include <filesystem>
#include <string>

#include "support/fixtures.hpp"
#include "umem/core/topology.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"

namespace umem::test {

inline constexpr const char* kRocminfo4Socket = "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt";
inline constexpr const char* kNumactl4Socket = "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt";

// rocminfo agents + numactl NUMA nodes, GPU i (HSA order) bound to NUMA node i the way the
// "kfd-order" mapping does it; rocm-smi --showtopo of the 4-socket node shows the same.
inline topology mi300a_4socket_model(const std::filesystem::path& rocminfo, const std::filesystem::path& numactl) {
  topology t = importers::import_rocminfo(read_text(rocminfo), rocminfo.filename().string()).topo;
  t.numa = importers::import_numactl(read_text(numactl), numactl.filename().string()).numa;
  t.sources.push_back("numactl:" + numactl.filename().string());
  int i = 0;
  for (const agent* g : t.gpus()) {
    t.gpu_numa.push_back({g->kfd_node, i, "kfd-order",
                          "GPU " + std::to_string(i) + " of the HSA order on NUMA node " + std::to_string(i) +
                              " (set by the test)"});
    ++i;
  }
  return t;
}

}  // namespace umem::test

// Sets `var` to the 4-socket model, or skips naming the missing capture.
#define UMEM_REQUIRE_MI300A_4SOCKET(var)                             \
  UMEM_REQUIRE_FIXTURE(var##_rocminfo, ::umem::test::kRocminfo4Socket); \
  UMEM_REQUIRE_FIXTURE(var##_numactl, ::umem::test::kNumactl4Socket);   \
  const ::umem::topology var = ::umem::test::mi300a_4socket_model(var##_rocminfo, var##_numactl)
