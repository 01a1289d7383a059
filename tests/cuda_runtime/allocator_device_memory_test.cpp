// The allocator on the CUDA backend (Note [Device placements] in allocator.hpp), through the CUDA
// double: `device:0` on a discrete GPU is the GPU's own memory (small segments from cuMemAlloc,
// the large pool's expandable segment grown through the virtual memory API, cuMemAlloc where the
// driver has none; cached, trimmed, out of memory without spill), on a unified one it stays host
// memory, and host placements are unaffected. Budgets are the served device's total memory.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_env.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::alloc {
namespace {

using machine::gpu_runtime_request;
using machine::live_machine;
using machine::select_gpu_runtime;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t kBudget = 64 * MiB;  // the served GPU's device memory

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const request on_device0{parse_placement("device:0"), std::nullopt};

class AllocatorDeviceMemory : public ::testing::Test {
 protected:
  // The double serves one H200 with kBudget of device memory; `pageable` makes it unified (HMM).
  // The model is this machine's NUMA nodes with the GPU on node 0, as live discovery builds it.
  // `candidates`: the double to load (test::cuda_double_no_vmm_candidates(): an old driver).
  std::unique_ptr<allocator> make(
      const std::string& conf, bool pageable = false,
      const std::vector<std::string>& candidates = test::cuda_double_candidates()) {
    topology machine = test::h200_machine();
    machine.agents[0].cuda->total_memory_bytes = kBudget;
    machine.agents[0].cuda->pageable_memory_access = pageable;
    machine.agents[0].coherent_host_access = pageable;
    served_ = std::make_unique<test::cuda_double_machine>(machine);
    // Keeps the double loaded (and its state) after the allocator lets its driver go.
    loaded_.emplace(cuda::cuda_driver::load_from(candidates));
    live_machine m;
    m.topo.hsa.state = runtime_state::no_library;
    m.topo.numa = numa::load_hwloc_live();
    m.runtime = select_gpu_runtime(m.topo, gpu_runtime_request::cuda, nullptr, candidates);
    EXPECT_EQ(m.runtime->kind(), machine::gpu_runtime_kind::cuda);
    m.topo.gpu_numa = {{m.topo.gpus().at(0)->kfd_node, 0, "test", "the served GPU is on node 0"}};
    return std::make_unique<allocator>(parse_alloc_conf(conf), std::move(m));
  }
  void TearDown() override { served_.reset(); }

  std::unique_ptr<test::cuda_double_machine> served_;
  std::optional<cuda::cuda_driver> loaded_;
};

TEST_F(AllocatorDeviceMemory, DiscreteDeviceMemoryIsCachedAndItsLargeSegmentGrowsInPlace) {
  auto a = make("thread_cache:0");
  void* p = a->allocate(3 * MiB, on_device0);
  EXPECT_EQ(a->kind_of(p), memory_kind::device);
  EXPECT_GE(a->allocation_size(p), 3 * MiB);
  EXPECT_EQ(test::cuda_double_calls("address_reserve "), 1);  // the expandable segment
  EXPECT_EQ(test::cuda_double_calls("mem_create "), 2);  // 2 MiB chunks
  EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 0);
  EXPECT_EQ(test::cuda_double_calls("register "), 0) << "device memory is not registered host memory";
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(4 * MiB));
  a->deallocate(p);
  void* q = a->allocate(3 * MiB, on_device0);  // reused from the cache
  EXPECT_EQ(test::cuda_double_calls("mem_create "), 2);
  // q left 1 MiB free, split off (a device pool splits off remainders above 256 KiB, Note
  // [Medium blocks] in caching_pool.hpp): r starts there, the segment grows by the 2 MiB it lacks.
  void* r = a->allocate(3 * MiB, on_device0);
  EXPECT_EQ(static_cast<char*>(r) - static_cast<char*>(q), static_cast<std::ptrdiff_t>(3 * MiB));
  EXPECT_EQ(test::cuda_double_calls("address_reserve "), 1);
  EXPECT_EQ(test::cuda_double_calls("mem_create "), 3);
  EXPECT_EQ(a->memory_stats().at("segment.device0.current"), 1);
  a->deallocate(q);
  a->deallocate(r);
  EXPECT_EQ(test::cuda_double_calls("mem_unmap "), 0);
  EXPECT_EQ(a->trim(), 6 * MiB);
  EXPECT_EQ(test::cuda_double_calls("mem_unmap "), 3);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

// Note [Device pools] in allocator.cpp: PyTorch frees device blocks on its autograd threads, so a
// block one thread freed must serve the next request of any thread, not wait in that thread's
// cache while the pool grows for another copy of it.
TEST_F(AllocatorDeviceMemory, ABlockFreedOnOneThreadServesAnotherWithoutGrowingTheDevicePool) {
  auto a = make("");  // the default thread cache, which host pools use
  void* p = a->allocate(3 * MiB, on_device0);
  a->deallocate(p);
  const int created = test::cuda_double_calls("mem_create ");
  void* q = nullptr;
  std::thread([&] { q = a->allocate(3 * MiB, on_device0); }).join();
  EXPECT_EQ(q, p);
  EXPECT_EQ(test::cuda_double_calls("mem_create "), created) << "the device pool grew";
  EXPECT_EQ(a->memory_stats().at("reserved_bytes.device0.current"),
            static_cast<std::int64_t>(4 * MiB));
  a->deallocate(q);
}

// Note [Device pools] in allocator.cpp: a block of 256 KiB-1 MiB never takes a new small segment
// of a GPU's memory, yet shares one that has room with the small blocks after it, as in PyTorch's
// allocator (its graph test counts a 1 MiB tensor and the graph's few bytes in one segment).
TEST_F(AllocatorDeviceMemory, AMediumBlockSharesASmallSegmentWithRoomElseFillsTheLargePool) {
  auto a = make("thread_cache:0");
  auto count = [&](const char* key) { return a->memory_stats().at(key); };
  void* first = a->allocate(1 * MiB, on_device0);  // no small segment: the large one
  EXPECT_EQ(count("segment.small_pool.current"), 0);
  EXPECT_EQ(count("segment.large_pool.current"), 1);
  void* second = a->allocate(1 * MiB, on_device0);  // the large segment's other half
  EXPECT_EQ(static_cast<char*>(second) - static_cast<char*>(first),
            static_cast<std::ptrdiff_t>(MiB));
  EXPECT_EQ(count("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(2 * MiB));
  void* tiny = a->allocate(512, on_device0);  // a small segment
  void* medium = a->allocate(1 * MiB, on_device0);  // in it, after tiny
  void* holders[] = {a->allocate(512, on_device0), a->allocate(512, on_device0)};
  EXPECT_EQ(static_cast<char*>(medium) - static_cast<char*>(tiny), 512);
  EXPECT_EQ(count("segment.small_pool.current"), 1);
  EXPECT_EQ(count("reserved_bytes.all.current"), static_cast<std::int64_t>(4 * MiB));
  for (void* p : {first, second, tiny, medium, holders[0], holders[1]}) a->deallocate(p);
  // Host pools keep PyTorch's classes whole: 1 MiB takes a small segment there.
  void* host = a->allocate(1 * MiB);
  EXPECT_EQ(a->memory_stats().at("segment.small_pool.current"), 2);
  a->deallocate(host);
}

// PyTorch's empty_cache gives back the free pages of an expandable segment that keeps live
// blocks; so does trim() here (Note [Giving device pages back] in cuda_device_source.hpp).
TEST_F(AllocatorDeviceMemory, TrimGivesBackTheFreeChunksOfASegmentThatKeepsALiveBlock) {
  auto a = make("thread_cache:0");
  void* keep = a->allocate(4 * MiB, on_device0);
  void* big = a->allocate(16 * MiB, on_device0);  // grows the segment right after keep
  a->deallocate(big);
  EXPECT_EQ(a->memory_stats().at("reserved_bytes.device0.current"), 20 * MiB);
  EXPECT_EQ(a->trim(), 16 * MiB);
  EXPECT_EQ(test::cuda_double_calls("synchronize "), 1) << "kernels may still use a freed block";
  EXPECT_EQ(test::cuda_double_calls("mem_unmap "), 8);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(4 * MiB));
  EXPECT_EQ(a->memory_stats().at("reserved_bytes.device0.current"), 4 * MiB);
  EXPECT_EQ(a->memory_stats().at("segment.device0.current"), 1);
  void* again = a->allocate(16 * MiB, on_device0);  // the same range, mapped again
  EXPECT_EQ(again, big);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(20 * MiB));
  EXPECT_EQ(a->memory_stats().at("reserved_bytes.device0.current"), 20 * MiB);
  std::memset(again, 3, 16 * MiB);
  a->deallocate(again);
  a->deallocate(keep);
  EXPECT_EQ(a->trim(), 20 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(AllocatorDeviceMemory, WithoutTheVirtualMemoryApiLargeSegmentsComeFromCuMemAlloc) {
  const test::use_cuda_double_without_vmm old_driver;
  auto a = make("thread_cache:0", /*pageable=*/false, test::cuda_double_no_vmm_candidates());
  void* p = a->allocate(3 * MiB, on_device0);
  void* q = a->allocate(3 * MiB, on_device0);  // a second segment: the first cannot grow
  EXPECT_EQ(a->kind_of(p), memory_kind::device);
  EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 2);
  EXPECT_EQ(a->memory_stats().at("segment.device0.current"), 2);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(8 * MiB));
  a->deallocate(p);
  a->deallocate(q);
  EXPECT_EQ(a->trim(), 8 * MiB);
  EXPECT_EQ(test::cuda_double_calls("mem_free "), 2);
  a.reset();
  loaded_.reset();
  served_.reset();  // resets the double without VMM while the guard still points at it
}

TEST_F(AllocatorDeviceMemory, ThePolicyDeviceTakesTheFastPathToTheDevicePool) {
  auto a = make("policy:device:0");
  for (int i = 0; i < 3; ++i) {
    void* p = a->allocate(MiB / 8);
    EXPECT_EQ(a->kind_of(p), memory_kind::device);
    a->deallocate(p);
  }
  EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 1);  // one 2 MiB small segment
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(2 * MiB));
}

TEST_F(AllocatorDeviceMemory, OutOfDeviceMemoryNamesTheDeviceNeverSpillsAndLeaksNothing) {
  auto a = make("thread_cache:0,spill:allow");
  void* held = a->allocate(48 * MiB, on_device0);
  try {
    (void)a->allocate(32 * MiB, on_device0);
    FAIL() << "allocated past the device's memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "discrete GPU memory (never spilled to host memory)")) << m;
    EXPECT_TRUE(contains(m, "CUDA device 0 (NVIDIA H200) has no room for 33554432 bytes")) << m;
    EXPECT_TRUE(contains(m, "16777216 of 67108864 bytes free")) << m;
  }
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(48 * MiB));
  const auto stats = a->memory_stats();
  EXPECT_EQ(stats.at("segment.device0.current"), 1);
  EXPECT_EQ(stats.at("num_ooms.device0"), 1) << "counted by the device pool";
  for (const auto& [key, value] : stats)
    EXPECT_FALSE(contains(key, ".node")) << key << ": nothing spilled to a host pool";
  a->deallocate(held);
}

TEST_F(AllocatorDeviceMemory, ADeviceLimitBoundsTheDevicePoolBeforeTheDeviceRunsOut) {
  // A quarter of the 64 MiB device: 16 MiB. 12 MiB fits; 8 MiB more would make 20 (the segment
  // grows by whole 2 MiB granules: 12 + 8), so it fails without asking the driver.
  auto a = make("thread_cache:0,limit.device0:0.25");
  void* held = a->allocate(12 * MiB, on_device0);
  const int creates = test::cuda_double_calls("mem_create ");
  try {
    (void)a->allocate(8 * MiB, on_device0);
    FAIL() << "allocated past limit.device0";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "past the pool's limit of 16777216 bytes (limit_bytes)")) << m;
  }
  EXPECT_EQ(test::cuda_double_calls("mem_create "), creates);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(12 * MiB));
  void* more = a->allocate(4 * MiB, on_device0);  // exactly up to the limit
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(16 * MiB));
  a->deallocate(more);
  a->deallocate(held);
}

TEST_F(AllocatorDeviceMemory, ADeviceLimitForAUnifiedGpuIsAnError) {
  try {
    (void)make("limit.device0:1GiB", /*pageable=*/true);
    FAIL() << "a unified GPU took a device limit";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "limit.device0: GPU 0 is unified")) << e.what();
    EXPECT_TRUE(contains(e.what(), "limit.node<N>")) << e.what();
  }
}

TEST_F(AllocatorDeviceMemory, ADeviceLimitForAGpuThatDoesNotExistIsAnError) {
  try {
    (void)make("limit.device3:1GiB");
    FAIL() << "a device limit for a GPU that does not exist";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_EQ(std::string(e.what()),
              "limit.device3: the topology's GPUs are device:0 to device:0");
  }
}

TEST_F(AllocatorDeviceMemory, DeviceMemoryInfoIsWhatTheDeviceHasLeft) {
  auto a = make("thread_cache:0");
  EXPECT_EQ(a->device_memory_info(0),
            (std::pair<std::uint64_t, std::uint64_t>{kBudget, kBudget}));
  void* p = a->allocate(6 * MiB, on_device0);
  EXPECT_EQ(a->device_memory_info(0),
            (std::pair<std::uint64_t, std::uint64_t>{kBudget - 6 * MiB, kBudget}));
  a->deallocate(p);
  try {
    (void)a->device_memory_info(1);
    FAIL() << "device 1 does not exist";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_TRUE(contains(e.what(), "the topology has 1 GPU(s)")) << e.what();
  }
}

TEST_F(AllocatorDeviceMemory, StatisticsAndDescriptionShowTheDevicePool) {
  auto a = make("thread_cache:0");
  void* host = a->allocate(MiB);
  void* dev = a->allocate(5 * MiB, on_device0);
  const auto stats = a->memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.device0.current"),
            static_cast<std::int64_t>(a->allocation_size(dev)));
  EXPECT_EQ(stats.at("reserved_bytes.device0.current"), static_cast<std::int64_t>(6 * MiB));
  EXPECT_EQ(stats.at("allocated_bytes.all.current"),
            static_cast<std::int64_t>(a->allocation_size(dev) + a->allocation_size(host)));
  EXPECT_TRUE(contains(a->describe(), "\ndevice0: CUDA device 0 (NVIDIA H200) memory: cuMemAlloc"))
      << a->describe();
  EXPECT_TRUE(contains(a->memory_snapshot_json(), "\"device0\"")) << a->memory_snapshot_json();
  a->deallocate(dev);
  a->deallocate(host);
}

TEST_F(AllocatorDeviceMemory, HostPlacementsAreUnaffected) {
  auto a = make("thread_cache:0");
  void* p = a->allocate(3 * MiB);
  EXPECT_EQ(a->kind_of(p), memory_kind::host);
  EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 0);
  EXPECT_EQ(test::cuda_double_calls("register "), 1);  // the H200 reaches host memory registered
  static_cast<char*>(p)[0] = 1;
  a->deallocate(p);
}

TEST_F(AllocatorDeviceMemory, AUnifiedDeviceKeepsHostMemory) {
  auto a = make("thread_cache:0", /*pageable=*/true);
  void* p = a->allocate(3 * MiB, on_device0);
  EXPECT_EQ(a->kind_of(p), memory_kind::host);
  static_cast<char*>(p)[0] = 1;
  EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 0);
  EXPECT_EQ(a->device_memory_info(0), std::nullopt);
  for (const auto& [key, value] : a->memory_stats())
    EXPECT_FALSE(contains(key, "device0")) << key;
  EXPECT_TRUE(contains(a->memory_stats_json(), "allocated_bytes.node0_"));
  a->deallocate(p);
}

TEST_F(AllocatorDeviceMemory, DestroyingTheAllocatorFreesDeviceMemoryAndTheContext) {
  auto a = make("");
  a->deallocate(a->allocate(8 * MiB, on_device0));
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), static_cast<long long>(8 * MiB));
  a.reset();
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
  EXPECT_EQ(test::cuda_double_retains(0), 0);
}

}  // namespace
}  // namespace umem::alloc
