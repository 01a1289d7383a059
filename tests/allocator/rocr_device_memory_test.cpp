// The ROCr backend's device memory (rocr_device_source.hpp) through the ROCr double: on the
// 2-socket 4x MI300X capture `device:D` is GPU D's VRAM pool (the double logs which pool each
// allocation comes from), freed back to it, out of memory without spill, with memory_info from
// the pool's size and the agent's MEMORY_AVAIL; on the 4-socket MI300A capture `device:D` stays
// host memory locked for the GPUs. The model's NUMA nodes are this machine's, every GPU on the
// first node with CPUs, as the CUDA suite does (tests/cuda_runtime/allocator_device_memory_test).
//
// Values from rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt: GPU agents are KFD nodes 2-5
// (lines 137-444), so device 1 is node 3 (line 236); its Pool 1 (the double's pool=0) is GLOBAL
// COARSE GRAINED, 201310208 KB = 206141652992 bytes, allocatable, granule 4KB (lines 173-179),
// so segments are multiples of 2 MiB.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/gpu_backend.hpp"
#include "umem/allocator/gpu/live_machine.hpp"
#include "umem/allocator/gpu/rocr_device_source.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::alloc {
namespace {

using umem::test::scoped_env;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::uint64_t kVram = 201310208ull * 1024;  // 206141652992: each MI300X's Pool 1
constexpr const char* kMi300x = "rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt";
constexpr std::uint32_t kStatusError = 0x1000;              // HSA_STATUS_ERROR
constexpr std::uint32_t kStatusInvalidAllocation = 0x1003;  // HSA_STATUS_ERROR_INVALID_ALLOCATION

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const request on_device1{parse_placement("device:1"), std::nullopt};

// A test control of the double (double_memory.cpp); the double must be loaded.
template <class Fn>
Fn double_control(const char* double_path, const char* name) {
  void* h = dlopen(double_path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  auto fn = reinterpret_cast<Fn>(dlsym(h, name));
  dlclose(h);  // NOLOAD: the library stays mapped by the test's own load
  return fn;
}

void set_foreign_use(const char* double_path, std::uint32_t kfd_node, std::uint64_t bytes) {
  auto fn = double_control<void (*)(std::uint32_t, std::uint64_t)>(
      double_path, "umem_rocr_double_set_foreign_use");
  ASSERT_NE(fn, nullptr);
  fn(kfd_node, bytes);
}

void fail_next_pool_allocate(const char* double_path, std::uint32_t status) {
  auto fn = double_control<void (*)(std::uint32_t)>(double_path,
                                                    "umem_rocr_double_fail_next_pool_allocate");
  ASSERT_NE(fn, nullptr);
  fn(status);
}

// The umem::error `f` throws, as {code, message}; {nullopt, ""} and a test failure when none.
template <class F>
std::pair<std::optional<errc>, std::string> failure_of(F&& f) {
  try {
    f();
  } catch (const umem::error& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "expected a umem::error";
  return {std::nullopt, ""};
}

// The log's lines that start with `prefix`.
std::vector<std::string> calls(const std::string& log, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : test::lines_of(log))
    if (l.starts_with(prefix)) out.push_back(l);
  return out;
}

// "aN" of a "pool_allocate ... -> SUCCESS aN" line.
std::string allocation_id(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

class RocrDeviceMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    UMEM_REQUIRE_FIXTURE(rocminfo, kMi300x);
    mi300x_ = umem::test::import_capture(rocminfo);
    ASSERT_EQ(mi300x_.gpus().size(), 4u);
  }

  // The MI300X as ROCr >= 6.1 reports it: MEMORY_PROPERTIES without the APU bit. The capture's
  // older rocminfo prints no "Memory Properties" line, so there is_apu is unknown.
  topology discrete_mi300x() const {
    topology t = mi300x_;
    for (auto& a : t.agents)
      if (a.kind == agent_kind::gpu) a.is_apu = false;
    return t;
  }

  // The double serving `served` as release `version`, discovered into a live machine with the
  // ROCr backend selected. Keeps the library loaded for the test.
  live_machine machine(const topology& served, const char* double_path = UMEM_ROCR_DOUBLE_PATH,
                       const char* version = "7.1") {
    path_ = double_path;
    snap_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT", umem::test::write_snapshot(dir_, served).string());
    ver_.emplace("UMEM_ROCR_DOUBLE_VERSION", version);
    lib_ = std::make_shared<const hsa::rocr_library>(
        hsa::rocr_library::load_from(std::vector<std::string>{double_path}));
    live_machine m;
    hsa::discover_rocr(m.topo, *lib_);
    EXPECT_EQ(m.topo.hsa.state, runtime_state::available) << m.topo.hsa.state_reason;
    m.rocr = lib_;
    m.backend = select_gpu_backend(m.topo, gpu_backend_request::rocr, lib_, {});
    EXPECT_STREQ(m.backend->name(), "rocr") << m.topo.gpu_backend.reason;
    m.topo.numa = numa::load_hwloc_live();
    int node = 0;
    for (const auto& n : m.topo.numa.nodes)
      if (!n.cpus.empty()) {
        node = n.os_index;
        break;
      }
    for (const agent* g : m.topo.gpus())
      m.topo.gpu_numa.push_back({g->kfd_node, node, "test", "every GPU on the first CPU node"});
    return m;
  }

  std::unique_ptr<allocator> make(const std::string& conf, const topology& served) {
    auto a = std::make_unique<allocator>(parse_alloc_conf(conf), machine(served));
    umem::test::double_reset(path_);  // from here the log holds the allocations' calls
    return a;
  }

  std::string log() const { return umem::test::double_call_log(path_); }

  topology mi300x_;
  umem::test::temp_dir dir_;
  std::optional<scoped_env> snap_, ver_;
  const char* path_ = nullptr;
  std::shared_ptr<const hsa::rocr_library> lib_;
};

TEST_F(RocrDeviceMemory, DeviceAllocationsComeFromTheGpusVramPoolAndFreesReturnThere) {
  auto a = make("thread_cache:0", discrete_mi300x());
  void* large = a->allocate(3 * MiB, on_device1);  // a 4 MiB large segment
  void* small = a->allocate(MiB / 2, on_device1);  // a 2 MiB small segment
  EXPECT_EQ(a->kind_of(large), memory_kind::device);
  EXPECT_EQ(a->kind_of(small), memory_kind::device);
  const auto allocs = calls(log(), "pool_allocate ");
  ASSERT_EQ(allocs.size(), 2u) << log();
  EXPECT_TRUE(allocs[0].starts_with("pool_allocate node3 pool=0 size=4194304 flags=0 -> SUCCESS a"))
      << allocs[0];
  EXPECT_TRUE(allocs[1].starts_with("pool_allocate node3 pool=0 size=2097152 flags=0 -> SUCCESS a"))
      << allocs[1];
  EXPECT_TRUE(calls(log(), "memory_lock").empty()) << "device memory is not locked host memory";
  EXPECT_EQ(a->memory_stats().at("segment.device1.current"), 2);
  EXPECT_EQ(a->device_memory_info(1),
            (std::pair<std::uint64_t, std::uint64_t>{kVram - 6 * MiB, kVram}));
  EXPECT_NE(a->describe().find("device1: ROCr device 1 (AMD Instinct MI300X) VRAM pool"),
            std::string::npos)
      << a->describe();

  a->deallocate(large);
  a->deallocate(small);
  EXPECT_TRUE(calls(log(), "pool_free ").empty()) << "cached until trimmed";
  EXPECT_EQ(a->trim(), 6 * MiB);
  const auto frees = calls(log(), "pool_free ");
  ASSERT_EQ(frees.size(), 2u) << log();
  std::vector<std::string> freed = {frees[0], frees[1]};
  std::sort(freed.begin(), freed.end());
  std::vector<std::string> expected = {"pool_free " + allocation_id(allocs[0]) + " -> SUCCESS",
                                       "pool_free " + allocation_id(allocs[1]) + " -> SUCCESS"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(freed, expected);
  EXPECT_EQ(a->device_memory_info(1), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
}

TEST_F(RocrDeviceMemory, MemoryInfoIsThePoolSizeAndWhatTheAgentHasLeftForAllProcesses) {
  auto a = make("thread_cache:0", discrete_mi300x());
  EXPECT_EQ(a->device_memory_info(1), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
  void* p = a->allocate(6 * MiB, on_device1);
  EXPECT_EQ(a->device_memory_info(1),
            (std::pair<std::uint64_t, std::uint64_t>{kVram - 6 * MiB, kVram}));
  set_foreign_use(path_, 3, std::uint64_t{1} << 30);  // another process holds 1 GiB of GPU 1
  EXPECT_EQ(a->device_memory_info(1),
            (std::pair<std::uint64_t, std::uint64_t>{kVram - 6 * MiB - 1024 * MiB, kVram}));
  set_foreign_use(path_, 2, std::uint64_t{1} << 30);  // GPU 0's memory is not GPU 1's
  EXPECT_EQ(a->device_memory_info(0), (std::pair<std::uint64_t, std::uint64_t>{
                                          kVram - 1024 * MiB, kVram}));
  a->deallocate(p);
}

TEST_F(RocrDeviceMemory, OutOfVramIsOutOfMemoryNamingTheDeviceAndNeverSpills) {
  auto a = make("thread_cache:0,spill:allow", discrete_mi300x());
  set_foreign_use(path_, 3, kVram - 64 * MiB);  // 64 MiB of GPU 1 left
  void* held = a->allocate(48 * MiB, on_device1);
  const auto [code, m] = failure_of([&] { (void)a->allocate(32 * MiB, on_device1); });
  EXPECT_EQ(code, errc::out_of_memory);
  EXPECT_TRUE(contains(m, "discrete GPU memory (never spilled to host memory)")) << m;
  EXPECT_TRUE(contains(m, "ROCr device 1 (AMD Instinct MI300X) has no room for 33554432 bytes"))
      << m;
  EXPECT_TRUE(contains(m, "HSA_STATUS_ERROR_OUT_OF_RESOURCES")) << m;
  EXPECT_TRUE(contains(m, "16777216 of 206141652992 bytes free")) << m;
  const auto allocs = calls(log(), "pool_allocate ");
  ASSERT_GE(allocs.size(), 2u) << log();
  EXPECT_EQ(allocs[1], "pool_allocate node3 pool=0 size=33554432 flags=0 -> OUT_OF_RESOURCES");
  const auto stats = a->memory_stats();
  EXPECT_EQ(stats.at("segment.device1.current"), 1);
  EXPECT_EQ(stats.at("num_ooms.device1"), 1);
  for (const auto& [key, value] : stats)
    EXPECT_FALSE(contains(key, ".node")) << key << ": nothing spilled to a host pool";
  EXPECT_TRUE(calls(log(), "memory_lock").empty()) << log();
  a->deallocate(held);
}

TEST_F(RocrDeviceMemory, InvalidAllocationIsOutOfMemoryAndOtherFailuresNameTheCall) {
  live_machine m = machine(discrete_mi300x());
  auto source = m.backend->make_device_memory_source(m.topo, 1);
  ASSERT_NE(source, nullptr);
  EXPECT_TRUE(source->describe().starts_with("ROCr device 1 (AMD Instinct MI300X) VRAM pool"))
      << source->describe();
  const node_binding where{bind_mode::bind, {0}};
  fail_next_pool_allocate(path_, kStatusInvalidAllocation);
  const auto oom = failure_of([&] { (void)source->allocate(1, where, coherence::coarse); });
  EXPECT_EQ(oom.first, errc::out_of_memory);
  EXPECT_TRUE(contains(oom.second, "ROCr device 1 (AMD Instinct MI300X) has no room for 2097152 "
                                   "bytes: hsa_amd_memory_pool_allocate failed: "
                                   "HSA_STATUS_ERROR_INVALID_ALLOCATION"))
      << oom.second;
  EXPECT_TRUE(contains(oom.second, "206141652992 of 206141652992 bytes free")) << oom.second;
  fail_next_pool_allocate(path_, kStatusError);
  const auto other = failure_of([&] { (void)source->allocate(5 * MiB, where, coherence::coarse); });
  EXPECT_EQ(other.first, errc::runtime_error);
  EXPECT_TRUE(contains(other.second, "hsa_amd_memory_pool_allocate of 6291456 bytes on ROCr "
                                     "device 1 (AMD Instinct MI300X) failed: HSA_STATUS_ERROR"))
      << other.second;
  const segment s = source->allocate(5 * MiB, where, coherence::coarse);  // the double recovered
  EXPECT_EQ(s.size, 6 * MiB);
  EXPECT_EQ(s.binding, where);
  EXPECT_EQ(source->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram - 6 * MiB, kVram}));
  source->deallocate(s);
  EXPECT_EQ(source->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
  EXPECT_THROW((void)m.backend->make_device_memory_source(m.topo, 4), umem::error);
}

TEST_F(RocrDeviceMemory, AnMi300xWhoseRuntimeDoesNotSayItIsDiscreteKeepsHostMemory) {
  live_machine m = machine(mi300x_);  // is_apu unknown: counted as unified (gpu_memory_kind.hpp)
  for (int d = 0; d < 4; ++d) EXPECT_EQ(m.backend->make_device_memory_source(m.topo, d), nullptr);
}

TEST_F(RocrDeviceMemory, WithoutMemoryAvailFreeIsThePoolLessWhatTheSourceHolds) {
  // ROCr 5.2.3 knows neither MEMORY_PROPERTIES (so the backend would not choose device memory)
  // nor MEMORY_AVAIL: the source is made directly.
  live_machine m = machine(discrete_mi300x(), UMEM_ROCR_DOUBLE_523_PATH, "5.2.3");
  EXPECT_EQ(m.backend->make_device_memory_source(m.topo, 1), nullptr);
  rocr_device_source source(lib_, *m.topo.gpus()[1], 1);
  EXPECT_FALSE(source.reports_memory_avail());
  EXPECT_EQ(source.granularity(), 2 * MiB);
  EXPECT_EQ(source.memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
  const segment s = source.allocate(1, node_binding{bind_mode::bind, {0}}, coherence::coarse);
  EXPECT_EQ(s.size, 2 * MiB);
  EXPECT_EQ(source.held_bytes(), 2 * MiB);
  set_foreign_use(path_, 3, std::uint64_t{1} << 30);  // not seen without MEMORY_AVAIL
  EXPECT_EQ(source.memory_info(),
            (std::pair<std::uint64_t, std::uint64_t>{kVram - 2 * MiB, kVram}));
  source.deallocate(s);
  EXPECT_EQ(source.held_bytes(), 0u);
  EXPECT_EQ(source.memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
}

TEST_F(RocrDeviceMemory, OnTheMi300aDevicePlacementsStayHostMemoryLockedForTheGpus) {
  UMEM_REQUIRE_FIXTURE(rocminfo, umem::test::kMi300aRocminfo);
  const topology mi300a = umem::test::import_capture(rocminfo);
  {
    live_machine m = machine(mi300a);
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(m.backend->make_device_memory_source(m.topo, d), nullptr);
  }
  auto a = make("thread_cache:0", mi300a);
  void* p = a->allocate(3 * MiB, on_device1);
  EXPECT_EQ(a->kind_of(p), memory_kind::host);
  EXPECT_EQ(a->device_memory_info(1), std::nullopt);
  EXPECT_TRUE(calls(log(), "pool_allocate ").empty()) << log();
  const auto locks = calls(log(), "memory_lock_to_pool ");
  ASSERT_EQ(locks.size(), 1u) << log();
  // Locked to CPU agent 0's COARSE pool (Pool 4, the double's 3) for all four GPUs (nodes 4-7).
  EXPECT_TRUE(contains(locks[0], " pool=node0/3 flags=0 agents=node4,node5,node6,node7 -> SUCCESS l"))
      << locks[0];
  a->deallocate(p);
}

}  // namespace
}  // namespace umem::alloc
