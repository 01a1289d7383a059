// Discovery through the CUDA double: the model rebuilt equals the machine the double serves, the
// no-device / failed-init / no-library verdicts, model keys, and each GPU's NUMA node from PCI
// sysfs through umem::numa::map_gpus_to_numa.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "cuda_test_env.hpp"
#include "support/sysfs_tree.hpp"
#include "umem/cuda_runtime/cuda_discovery.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"

namespace umem::cuda {
namespace {

using test::scoped_env;

cuda_driver double_driver() { return cuda_driver::load_from(test::cuda_double_candidates()); }

TEST(CudaDiscovery, RebuildsTheMachineTheDriverServes) {
  const topology machine = test::h200_machine();
  test::cuda_double_machine served(machine);
  const cuda_driver drv = double_driver();
  topology t;
  discover_cuda(t, drv);
  EXPECT_EQ(t.cuda.state, runtime_state::available) << t.cuda.state_reason;
  EXPECT_EQ(t.cuda.state_reason, "cuInit succeeded; 1 CUDA device");
  EXPECT_EQ(t.cuda.driver_version, 13000);
  EXPECT_EQ(t.cuda.library_path, drv.resolved_path());
  ASSERT_EQ(t.agents.size(), 1u);
  EXPECT_EQ(t.agents[0], machine.agents[0]);
  EXPECT_EQ(t.sources, std::vector<std::string>{"cuda"});
  EXPECT_EQ(t.agents[0].pci_address(), machine.agents[0].pci_address());
}

TEST(CudaDiscovery, AttributesTheDriverDoesNotKnowStayUnknown) {
  topology machine = test::h200_machine();
  machine.agents[0].uuid.clear();  // no UUID to give: cuDeviceGetUuid_v2 answers NOT_SUPPORTED
  auto& c = *machine.agents[0].cuda;
  c.host_numa_id.reset();
  c.pageable_memory_access_uses_host_page_tables.reset();
  c.direct_managed_mem_access_from_host.reset();
  test::cuda_double_machine served(machine);
  topology t;
  discover_cuda(t, double_driver());
  ASSERT_EQ(t.agents.size(), 1u);
  EXPECT_EQ(t.agents[0], machine.agents[0]);
}

TEST(CudaDiscovery, SeveralDevicesAreNumberedAfterTheAgentsAlreadyThere) {
  topology machine = test::h200_machine();
  agent second = machine.agents[0];
  second.cuda->ordinal = 1;
  second.bdfid = 0x2a00;  // 0000:2a:00.0
  second.uuid.clear();
  machine.agents.push_back(second);
  test::cuda_double_machine served(machine);
  topology t;
  t.agents.resize(2);  // e.g. ROCr agents with KFD nodes 0 and 4
  t.agents[1].kfd_node = 4;
  discover_cuda(t, double_driver());
  ASSERT_EQ(t.agents.size(), 4u);
  EXPECT_EQ(t.agents[2].kfd_node, 5u);
  EXPECT_EQ(t.agents[3].kfd_node, 6u);
  EXPECT_EQ(t.agents[3].cuda->ordinal, 1u);
  EXPECT_EQ(t.agents[3].pci_address(), "0000:2a:00.0");
}

TEST(CudaDiscovery, NoDeviceIsRecordedNotThrown) {
  scoped_env snap("UMEM_CUDA_DOUBLE_SNAPSHOT", std::nullopt);
  test::cuda_double_reset();
  topology t;
  discover_cuda(t, double_driver());
  EXPECT_EQ(t.cuda.state, runtime_state::no_driver);
  EXPECT_EQ(t.cuda.state_reason,
            "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)");
  EXPECT_TRUE(t.agents.empty());
  EXPECT_EQ(t.cuda.driver_version, 13000);  // cuDriverGetVersion needs no cuInit
}

TEST(CudaDiscovery, AnotherInitFailureIsInitFailed) {
  test::cuda_double_machine served(test::h200_machine());
  scoped_env fail("UMEM_CUDA_DOUBLE_INIT_RESULT", "999");
  topology t;
  discover_cuda(t, double_driver());
  EXPECT_EQ(t.cuda.state, runtime_state::init_failed);
  EXPECT_EQ(t.cuda.state_reason, "cuInit: CUDA_ERROR_UNKNOWN (unknown error)");
  EXPECT_TRUE(t.agents.empty());
}

TEST(CudaDiscovery, NoLibraryIsRecordedWithThePathsTried) {
  if (void* real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a real libcuda.so.1";
  }
  scoped_env lib("UMEM_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1");
  topology t;
  discover_cuda(t);
  EXPECT_EQ(t.cuda.state, runtime_state::no_library);
  EXPECT_NE(t.cuda.state_reason.find("/nonexistent/libcuda.so.1"), std::string::npos);
  EXPECT_EQ(t.sources, std::vector<std::string>{"cuda"});
}

// map_gpus_to_numa's "pci-sysfs" method works for CUDA agents: their PCI address is what the
// driver reported.
TEST(CudaDiscovery, EachGpuGetsItsNumaNodeFromPciSysfs) {
  topology machine = test::h200_machine();
  test::cuda_double_machine served(machine);
  topology t;
  discover_cuda(t, double_driver());
  t.numa.nodes = {{0, {0, 1, 2, 3, 4, 5, 6, 7}, 64ull << 30, std::nullopt, 0},
                  {1, {8, 9, 10, 11, 12, 13, 14, 15}, 64ull << 30, std::nullopt, 1}};
  const std::string dev = "/sys/bus/pci/devices/" + machine.agents[0].pci_address();
  {
    const test::sysfs_tree sys{{dev + "/numa_node", "1\n"}, {dev + "/local_cpus", "ff00\n"}};
    const fs_root root = sys.root();
    const auto b = numa::map_gpus_to_numa(t, &root);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].gpu_kfd_node, t.agents[0].kfd_node);
    EXPECT_EQ(b[0].numa_node, 1);
    EXPECT_EQ(b[0].method, "pci-sysfs");
  }
  {
    // A VM's firmware often says -1; local_cpus still names node 0's CPUs exactly.
    const test::sysfs_tree sys{{dev + "/numa_node", "-1\n"}, {dev + "/local_cpus", "00ff\n"}};
    const fs_root root = sys.root();
    const auto b = numa::map_gpus_to_numa(t, &root);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].numa_node, 0);
    EXPECT_EQ(b[0].method, "pci-sysfs");
  }
}

}  // namespace
}  // namespace umem::cuda
