// umtopo's report of a machine discovered through the CUDA backend (the H200 the double serves),
// and that reports of captures (no backend selected) gain no backend section.
#include <gtest/gtest.h>

#include "cuda_test_env.hpp"
#include "report.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"

namespace umem::umtopo {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ReportCuda, ShowsTheBackendAndTheUnifiedMemoryAttributes) {
  test::cuda_double_machine served(test::h200_machine());
  topology t;
  t.hsa.state = runtime_state::no_library;
  t.hsa.state_reason = "cannot load the ROCm runtime";
  t.numa.nodes = {{0, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 4ull << 30,
                   std::nullopt, 0}};
  (void)machine::select_gpu_runtime(t, machine::gpu_runtime_request::automatic, nullptr,
                                    test::cuda_double_candidates());
  t.gpu_numa = {{t.agents[0].kfd_node, 0, "pci-sysfs", "local_cpus (0-15) is node 0's CPUs"}};
  const std::string r = render_report(t);
  EXPECT_TRUE(contains(r, "  GPU agent, CUDA device 0: sm_90 (NVIDIA H200)\n")) << r;
  // data/h200_probe_attributes.txt P:5 150109880320 bytes = 139.8 GiB, P:7 132 SMs.
  EXPECT_TRUE(contains(r, "    CUDA:  compute capability 9.0, 132 SMs, 139.8 GiB device memory\n"))
      << r;
  EXPECT_TRUE(contains(r, "    PCI:   0000:00:06.0\n")) << r;
  EXPECT_TRUE(contains(r, "    unified memory: pageable-memory-access=no, "
                          "uses-host-page-tables=no, can-map-host-memory=yes, host-register=yes, "
                          "host-pointer-for-registered-memory=yes"))
      << r;
  EXPECT_TRUE(contains(r, "    host NUMA node (driver): 0\n")) << r;
  // P:8 INTEGRATED 0 and P:15 PAGEABLE_MEMORY_ACCESS 0: device:D gets the H200's own memory.
  EXPECT_TRUE(contains(r, "    device memory: discrete\n")) << r;
  EXPECT_TRUE(contains(r, "GPU backend: cuda (the ROCm runtime is no-library: cannot load the "
                          "ROCm runtime; the CUDA driver "))
      << r;
  EXPECT_TRUE(contains(r, "  CUDA driver: available (cuInit succeeded; 1 CUDA device)\n")) << r;
  EXPECT_TRUE(contains(r, "  CUDA driver version 13.0\n")) << r;
  EXPECT_TRUE(contains(r, "  GPU CUDA device 0: NUMA node 0 by pci-sysfs")) << r;
  EXPECT_FALSE(contains(r, "GPU-allocatable")) << r;  // HSA pools only; CUDA agents have none
}

TEST(ReportCuda, ModelsWithoutASelectionHaveNoBackendSection) {
  topology t;
  t.hsa.state = runtime_state::imported;
  EXPECT_FALSE(contains(render_report(t), "GPU backend")) << render_report(t);
  t.gpu_backend = {"none", "UMEM_GPU_BACKEND=none"};
  EXPECT_TRUE(contains(render_report(t), "GPU backend: none (UMEM_GPU_BACKEND=none)\n"));
}

}  // namespace
}  // namespace umem::umtopo
