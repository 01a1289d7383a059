// The ROCr backend's device memory (rocr_device_source.hpp) through the ROCr double: on the
// 2-socket 4x MI300X capture `device:D` is GPU D's VRAM pool (the double logs which pool each
// allocation comes from), freed back to it, out of memory without spill, with memory_info from
// the pool's size and the agent's MEMORY_AVAIL; on the 4-socket MI300A capture `device:D` stays
// host memory locked for the GPUs. The model's NUMA nodes are this machine's, every GPU on the
// first node with CPUs (rocr_double_machine.hpp).
//
// With the double's VMM exports (its 6.4/7.1 build) growable segments are reservations grown in
// place (Note [Growable ROCr device segments] in rocr_device_source.hpp): the double logs the
// reservation, each handle ("vN") and each mapped range by its offset in the reservation
// ("+4194304"), and counts what is outstanding; its 5.2.3 build has no VMM and keeps
// hsa_amd_memory_pool_allocate segments that do not grow.
//
// Values from rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt: GPU agents are KFD nodes 2-5
// (lines 137-444), so device 1 is node 3 (line 236); its Pool 1 (the double's pool=0) is GLOBAL
// COARSE GRAINED, 201310208 KB = 206141652992 bytes, allocatable, granule 4KB (lines 173-179),
// so segments, reservations and mapped ranges are multiples of lcm(4 KiB, 2 MiB) = 2 MiB.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "allocator/rocr_double_machine.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/gpu/rocr_device_source.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/machine/live_machine.hpp"

namespace umem::alloc {
namespace {

using machine::live_machine;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::uint64_t kVram = 201310208ull * 1024;  // 206141652992: each MI300X's Pool 1
constexpr const char* kMi300x = "rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt";
constexpr std::uint32_t kStatusError = 0x1000;              // HSA_STATUS_ERROR
constexpr std::uint32_t kStatusInvalidAllocation = 0x1003;  // HSA_STATUS_ERROR_INVALID_ALLOCATION
constexpr std::uint32_t kStatusOutOfResources = 0x1008;     // HSA_STATUS_ERROR_OUT_OF_RESOURCES
constexpr std::uint32_t kNode = 3;                          // device 1's KFD node

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const request on_device1{parse_placement("device:1"), std::nullopt};

using umem::test::double_control;

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

// The double's VMM controls (double_vmem.cpp): fail the next call of `call`; what is outstanding.
void fail_next_vmem(const char* double_path, const char* call, std::uint32_t status) {
  auto fn = double_control<void (*)(const char*, std::uint32_t)>(double_path,
                                                                 "umem_rocr_double_fail_next_vmem");
  ASSERT_NE(fn, nullptr);
  fn(call, status);
}

struct vmem_counts {
  int reservations = -1, handles = -1, mappings = -1;
  std::uint64_t handle_bytes = 0;  // of device 1
  bool operator==(const vmem_counts&) const = default;
};

vmem_counts vmem_outstanding(const char* double_path) {
  vmem_counts c;
  auto count = [&](const char* name) {
    auto fn = double_control<int (*)()>(double_path, name);
    return fn != nullptr ? fn() : -1;
  };
  c.reservations = count("umem_rocr_double_vmem_reservations");
  c.handles = count("umem_rocr_double_vmem_handles");
  c.mappings = count("umem_rocr_double_vmem_mappings");
  if (auto fn = double_control<std::uint64_t (*)(std::uint32_t)>(
          double_path, "umem_rocr_double_vmem_handle_bytes"))
    c.handle_bytes = fn(kNode);
  return c;
}

std::ostream& operator<<(std::ostream& os, const vmem_counts& c) {
  return os << c.reservations << " reservations, " << c.handles << " handles, " << c.mappings
            << " mappings, " << c.handle_bytes << " handle bytes";
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

// `f` throws umem::error(`code`) whose message holds every one of `parts`.
template <class F>
void expect_failure(F&& f, errc code, std::initializer_list<std::string> parts) {
  const auto [got, message] = failure_of(std::forward<F>(f));
  EXPECT_EQ(got, code) << message;
  for (const std::string& part : parts) EXPECT_TRUE(contains(message, part)) << message;
}

// The log's lines that start with `prefix`.
std::vector<std::string> calls(const std::string& log, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& l : test::lines_of(log))
    if (l.starts_with(prefix)) out.push_back(l);
  return out;
}

// "aN" of a "pool_allocate ... -> SUCCESS aN" line, "vN" of a "vmem_handle_create" one.
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
    live_machine m = double_.serve(served, double_path, version);
    path_ = double_.path();
    lib_ = double_.library();
    return m;
  }

  std::unique_ptr<allocator> make(const std::string& conf, const topology& served) {
    auto a = std::make_unique<allocator>(parse_alloc_conf(conf), machine(served));
    umem::test::double_reset(path_);  // from here the log holds the allocations' calls
    return a;
  }

  std::string log() const { return umem::test::double_call_log(path_); }

  // Device 1's source on the double with VMM (7.1), made directly; the log starts after it.
  std::unique_ptr<rocr_device_source> vmem_source() {
    live_machine m = machine(discrete_mi300x());
    auto src = std::make_unique<rocr_device_source>(lib_, *m.topo.gpus()[1], 1);
    umem::test::double_reset(path_);
    return src;
  }

  topology mi300x_;
  umem::test::rocr_double_machine double_;
  const char* path_ = nullptr;
  std::shared_ptr<const hsa::rocr_library> lib_;
};

TEST_F(RocrDeviceMemory, DeviceAllocationsComeFromTheGpusVramPoolAndFreesReturnThere) {
  // Without expandable segments the large segment is a plain pool allocation too.
  auto a = make("thread_cache:0,expandable_segments:false", discrete_mi300x());
  void* large = a->allocate(3 * MiB, on_device1);  // a 4 MiB large segment
  void* small = a->allocate(MiB / 8, on_device1);  // a 2 MiB small segment
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
  auto a = make("thread_cache:0,spill:allow,expandable_segments:false", discrete_mi300x());
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
  auto source = make_device_memory_source(*m.runtime, m.topo, 1);
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
  EXPECT_THROW((void)make_device_memory_source(*m.runtime, m.topo, 4), umem::error);
}

TEST_F(RocrDeviceMemory, AnMi300xWhoseRuntimeDoesNotSayItIsDiscreteKeepsHostMemory) {
  live_machine m = machine(mi300x_);  // is_apu unknown: counted as unified (gpu_memory_kind.hpp)
  for (int d = 0; d < 4; ++d) EXPECT_EQ(make_device_memory_source(*m.runtime, m.topo, d), nullptr);
}

TEST_F(RocrDeviceMemory, WithoutMemoryAvailFreeIsThePoolLessWhatTheSourceHolds) {
  // ROCr 5.2.3 knows neither MEMORY_PROPERTIES (so the backend would not choose device memory)
  // nor MEMORY_AVAIL: the source is made directly.
  live_machine m = machine(discrete_mi300x(), UMEM_ROCR_DOUBLE_523_PATH, "5.2.3");
  EXPECT_EQ(make_device_memory_source(*m.runtime, m.topo, 1), nullptr);
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

// HIP knows a pool allocation (its arena) but not memory mapped with hsa_amd_vmem_map, so in a
// process that loaded HIP the segments stay plain pool allocations even where ROCr has the API.
TEST_F(RocrDeviceMemory, WithHipLoadedSegmentsArePoolAllocationsThatHipKnows) {
  live_machine m = machine(discrete_mi300x());
  ASSERT_TRUE(lib_->has_vmem());
  rocr_device_source source(lib_, *m.topo.gpus()[1], 1, /*hip_loaded=*/true);
  EXPECT_FALSE(source.grows());
  EXPECT_TRUE(contains(source.describe(), "segments do not grow (HIP is loaded and knows no "
                                          "hsa_amd_vmem_* mappings)"))
      << source.describe();
  umem::test::double_reset(path_);
  const node_binding where{bind_mode::bind, {0}};
  segment s = source.allocate_growable(3 * MiB, 64 * MiB, where, coherence::coarse);
  EXPECT_EQ(s.reserved_size, 0u) << "not growable";
  EXPECT_FALSE(source.grow(s, 2 * MiB));
  EXPECT_EQ(calls(log(), "vmem_").size(), 0u) << log();
  ASSERT_EQ(calls(log(), "pool_allocate ").size(), 1u) << log();
  // As HIP would see it: a ROCr pool allocation, so clr's arena object (HSA pointer type).
  hsa::rocr_pointer_info info;
  ASSERT_EQ(lib_->fn().hsa_amd_pointer_info(s.base, &info, nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(info.type, hsa::rocr_compat::pointer_type::hsa);
  source.deallocate(s);
}

TEST_F(RocrDeviceMemory, WithoutTheVmemApiSegmentsArePoolAllocationsThatDoNotGrow) {
  live_machine m = machine(discrete_mi300x(), UMEM_ROCR_DOUBLE_523_PATH, "5.2.3");
  ASSERT_FALSE(lib_->has_vmem());
  rocr_device_source source(lib_, *m.topo.gpus()[1], 1);
  EXPECT_FALSE(source.grows());
  EXPECT_TRUE(contains(source.describe(), "segments do not grow (no hsa_amd_vmem_* in this "
                                          "runtime)"))
      << source.describe();
  umem::test::double_reset(path_);
  const node_binding where{bind_mode::bind, {0}};
  segment s = source.allocate_growable(3 * MiB, 64 * MiB, where, coherence::coarse);
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(s.reserved_size, 0u) << "not growable";
  EXPECT_FALSE(source.grow(s, 2 * MiB));
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_FALSE(source.decommit(s, s.base, 2 * MiB));
  const auto allocs = calls(log(), "pool_allocate ");
  ASSERT_EQ(allocs.size(), 1u) << log();
  EXPECT_TRUE(allocs[0].starts_with("pool_allocate node3 pool=0 size=4194304 flags=0 -> SUCCESS"))
      << allocs[0];
  source.deallocate(s);
  EXPECT_EQ(calls(log(), "pool_free ").size(), 1u) << log();
  EXPECT_EQ(source.held_bytes(), 0u);
}

TEST_F(RocrDeviceMemory, AGrowableSegmentIsAReservationThatGrowsInPlace) {
  auto src = vmem_source();
  EXPECT_TRUE(src->grows());
  EXPECT_TRUE(contains(src->describe(), "growable segments through the virtual memory API"))
      << src->describe();
  const node_binding where{bind_mode::bind, {}};
  // 3 MiB rounds up to 4 MiB mapped, 15 MiB to a 16 MiB reservation.
  segment s = src->allocate_growable(3 * MiB, 15 * MiB, where, coherence::coarse);
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(s.reserved_size, 16 * MiB);
  EXPECT_EQ(s.binding, where);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.base) % (2 * MiB), 0u) << "chunk-aligned";
  const auto first = calls(log(), "vmem_handle_create ");
  ASSERT_EQ(first.size(), 1u) << log();
  const std::string v1 = allocation_id(first[0]);
  EXPECT_EQ(log(),
            "vmem_address_reserve_align size=16777216 alignment=2097152 flags=0 -> SUCCESS\n"
            "vmem_handle_create size=4194304 type=0 flags=0 -> SUCCESS " + v1 + "\n"
            "vmem_map +0 size=4194304 offset=0 " + v1 + " flags=0 -> SUCCESS\n"
            "vmem_set_access size=4194304 node3=3 -> SUCCESS\n");
  std::memset(s.base, 0x11, 4 * MiB);  // read/write for this agent: the double maps it so

  void* const base = s.base;
  ASSERT_TRUE(src->grow(s, 5 * MiB));  // 5 MiB rounds up to 6: mapped at +4 MiB
  EXPECT_EQ(s.base, base);
  EXPECT_EQ(s.size, 10 * MiB);
  EXPECT_EQ(s.reserved_size, 16 * MiB);
  const auto creates = calls(log(), "vmem_handle_create ");
  ASSERT_EQ(creates.size(), 2u) << log();
  const std::string v2 = allocation_id(creates[1]);
  EXPECT_EQ(creates[1], "vmem_handle_create size=6291456 type=0 flags=0 -> SUCCESS " + v2);
  EXPECT_EQ(calls(log(), "vmem_map ").back(),
            "vmem_map +4194304 size=6291456 offset=0 " + v2 + " flags=0 -> SUCCESS");
  static_cast<unsigned char*>(base)[10 * MiB - 1] = 0x22;
  EXPECT_EQ(static_cast<unsigned char*>(base)[4 * MiB - 1], 0x11) << "the first range stays";
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 2, 2, 10 * MiB}));
  EXPECT_EQ(src->held_bytes(), 10 * MiB);
  EXPECT_EQ(src->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram - 10 * MiB, kVram}));
  EXPECT_TRUE(calls(log(), "pool_allocate ").empty()) << log();

  ASSERT_TRUE(src->grow(s, 0));
  EXPECT_EQ(s.size, 10 * MiB);
  EXPECT_EQ(calls(log(), "vmem_handle_create ").size(), 2u) << "growing by 0 maps nothing";

  // Decommit is refused without a call: an unmapped device range is not backed on touch.
  const std::size_t before = log().size();
  EXPECT_FALSE(src->decommit(s, static_cast<char*>(base) + 2 * MiB, 4 * MiB));
  EXPECT_EQ(log().size(), before);

  umem::test::double_reset(path_);
  src->deallocate(s);
  EXPECT_EQ(log(), "vmem_unmap +0 size=4194304 -> SUCCESS\n"
                   "vmem_handle_release " + v1 + " -> SUCCESS\n"
                   "vmem_unmap +4194304 size=6291456 -> SUCCESS\n"
                   "vmem_handle_release " + v2 + " -> SUCCESS\n"
                   "vmem_address_free size=16777216 -> SUCCESS\n");
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(src->held_bytes(), 0u);
  EXPECT_EQ(src->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
}

TEST_F(RocrDeviceMemory, AnExhaustedReservationOrAPlainSegmentDoesNotGrow) {
  auto src = vmem_source();
  segment s = src->allocate_growable(4 * MiB, 8 * MiB, {}, coherence::coarse);
  ASSERT_TRUE(src->grow(s, 4 * MiB));  // 8 of 8 MiB mapped
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_FALSE(src->grow(s, 1));
  EXPECT_EQ(s.size, 8 * MiB);
  segment small = src->allocate_growable(4 * MiB, 10 * MiB, {}, coherence::coarse);
  EXPECT_FALSE(src->grow(small, 8 * MiB)) << "4 + 8 MiB > the 10 MiB reserved";
  EXPECT_TRUE(src->grow(small, 5 * MiB)) << "4 + 6 MiB fits exactly";
  EXPECT_EQ(small.size, 10 * MiB);
  // A reservation no larger than the request is a plain pool allocation (3 and 4 MiB both
  // round to 4 MiB), and a plain segment cannot grow.
  segment plain = src->allocate_growable(3 * MiB, 4 * MiB, {}, coherence::coarse);
  EXPECT_EQ(plain.reserved_size, 0u);
  EXPECT_FALSE(src->grow(plain, 2 * MiB));
  EXPECT_EQ(calls(log(), "pool_allocate ").size(), 1u) << log();
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{2, 4, 4, 18 * MiB}));
  EXPECT_EQ(src->held_bytes(), 22 * MiB);
  for (const segment& x : {s, small, plain}) src->deallocate(x);
  EXPECT_EQ(calls(log(), "pool_free ").size(), 1u) << log();
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(src->held_bytes(), 0u);
}

TEST_F(RocrDeviceMemory, OutOfVramInHandleCreateIsOutOfMemoryAndLeavesNothingBehind) {
  auto src = vmem_source();
  set_foreign_use(path_, kNode, kVram - 64 * MiB);  // 64 MiB of GPU 1 left
  const segment held = src->allocate(48 * MiB, {}, coherence::coarse);  // 16 MiB left
  expect_failure(
      [&] { (void)src->allocate_growable(32 * MiB, 128 * MiB, {}, coherence::coarse); },
      errc::out_of_memory,
      {"ROCr device 1 (AMD Instinct MI300X) has no room for 33554432 bytes: "
       "hsa_amd_vmem_handle_create failed: HSA_STATUS_ERROR_OUT_OF_RESOURCES",
       "16777216 of 206141652992 bytes free"});
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0})) << "the reservation is freed";
  EXPECT_EQ(calls(log(), "vmem_address_free ").size(), 1u) << log();

  segment s = src->allocate_growable(8 * MiB, 64 * MiB, {}, coherence::coarse);  // 8 MiB left
  expect_failure([&] { (void)src->grow(s, 16 * MiB); }, errc::out_of_memory,
                 {"has no room for 16777216 bytes: hsa_amd_vmem_handle_create failed",
                  "8388608 of 206141652992 bytes free"});
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 1, 1, 8 * MiB}));
  EXPECT_TRUE(src->grow(s, 8 * MiB)) << "what is left still maps";
  EXPECT_EQ(src->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{0, kVram}));
  src->deallocate(s);
  src->deallocate(held);
  set_foreign_use(path_, kNode, 0);
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(src->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
}

TEST_F(RocrDeviceMemory, AHalfDoneGrowthReleasesWhatItMadeAndOtherFailuresNameTheCall) {
  auto src = vmem_source();
  segment s = src->allocate_growable(4 * MiB, 32 * MiB, {}, coherence::coarse);

  umem::test::double_reset(path_);
  fail_next_vmem(path_, "vmem_map", kStatusInvalidAllocation);
  const auto grow4 = [&] { (void)src->grow(s, 4 * MiB); };
  expect_failure(grow4, errc::out_of_memory,
                 {"has no room for 4194304 bytes: hsa_amd_vmem_map failed: "
                  "HSA_STATUS_ERROR_INVALID_ALLOCATION"});
  const auto made = calls(log(), "vmem_handle_create ");
  ASSERT_EQ(made.size(), 1u) << log();
  EXPECT_EQ(calls(log(), "vmem_handle_release "),
            std::vector<std::string>{"vmem_handle_release " + allocation_id(made[0]) +
                                     " -> SUCCESS"});

  umem::test::double_reset(path_);
  fail_next_vmem(path_, "vmem_set_access", kStatusError);
  expect_failure(grow4, errc::runtime_error,
                 {"hsa_amd_vmem_set_access of 4194304 bytes on ROCr device 1 (AMD Instinct "
                  "MI300X) failed: HSA_STATUS_ERROR"});
  EXPECT_EQ(calls(log(), "vmem_unmap "),
            std::vector<std::string>{"vmem_unmap +4194304 size=4194304 -> SUCCESS"});
  EXPECT_EQ(calls(log(), "vmem_handle_release ").size(), 1u) << log();
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 1, 1, 4 * MiB}));
  EXPECT_EQ(src->held_bytes(), 4 * MiB);

  const auto growable = [&] {
    (void)src->allocate_growable(2 * MiB, 1024 * MiB, {}, coherence::coarse);
  };
  fail_next_vmem(path_, "vmem_address_reserve", kStatusOutOfResources);
  expect_failure(growable, errc::out_of_memory,
                 {"has no room for 1073741824 bytes: hsa_amd_vmem_address_reserve_align failed"});
  fail_next_vmem(path_, "vmem_handle_create", kStatusError);
  expect_failure(growable, errc::runtime_error,
                 {"hsa_amd_vmem_handle_create of 2097152 bytes on ROCr device 1 (AMD Instinct "
                  "MI300X) failed: HSA_STATUS_ERROR"});
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 1, 1, 4 * MiB})) << "nothing left behind";

  ASSERT_TRUE(src->grow(s, 4 * MiB)) << "the same range maps once the runtime lets it";
  EXPECT_EQ(s.size, 8 * MiB);
  src->deallocate(s);
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(src->held_bytes(), 0u);
}

TEST_F(RocrDeviceMemory, ACachingPoolGrowsOneReservationInsteadOfTakingNewSegments) {
  auto src = vmem_source();
  pool_config cfg;
  cfg.expandable_reserve_bytes = 32 * MiB;
  cfg.max_cached_bytes = 2 * MiB;  // the pool asks for a decommit once, is refused, stops asking
  {
    caching_pool pool(*src, {}, coherence::coarse, cfg);
    char* a = static_cast<char*>(pool.allocate(3 * MiB));  // a 4 MiB growable segment
    char* b = static_cast<char*>(pool.allocate(5 * MiB));  // grown by 6 MiB: at +4 MiB
    char* c = static_cast<char*>(pool.allocate(6 * MiB));  // grown by 6 MiB: at +10 MiB
    EXPECT_EQ(b - a, static_cast<std::ptrdiff_t>(4 * MiB));
    EXPECT_EQ(c - a, static_cast<std::ptrdiff_t>(10 * MiB));
    EXPECT_EQ(pool.stats()(metric::segment, size_class::large_pool).current, 1);
    EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 3, 3, 16 * MiB}));
    pool.deallocate(b);
    char* d = static_cast<char*>(pool.allocate(7 * MiB));  // b's 6 MiB is short: +8 MiB at 16
    EXPECT_EQ(d - a, static_cast<std::ptrdiff_t>(16 * MiB));
    pool.deallocate(a);  // merges with b's block: 10 MiB free, above max_cached_bytes
    EXPECT_EQ(static_cast<char*>(pool.allocate(8 * MiB)), a) << "fits there: no growth";
    EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{1, 4, 4, 24 * MiB}));
    EXPECT_TRUE(calls(log(), "vmem_unmap ").empty()) << "device pages are never given back";
    EXPECT_TRUE(calls(log(), "pool_allocate ").empty()) << log();
    std::memset(a, 9, 8 * MiB);
    for (char* p : {a, c, d}) pool.deallocate(p);
    EXPECT_EQ(pool.stats()(metric::reserved_bytes, size_class::all).current, 0)
        << "entirely free above max_cached_bytes: the grown segment goes back whole";
  }
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(calls(log(), "vmem_address_free ").size(), 1u) << log();
}

TEST_F(RocrDeviceMemory, AnAllocatorsDevicePoolGrowsItsExpandableSegment) {
  auto a = make("thread_cache:0", discrete_mi300x());
  char* p = static_cast<char*>(a->allocate(3 * MiB, on_device1));  // 4 MiB mapped, 256 GiB reserved
  // The 1 MiB left after p was split off (a device pool splits off remainders above 256 KiB,
  // Note [Medium blocks] in caching_pool.hpp): q starts there, the segment grows by the 4 MiB it
  // lacks.
  char* q = static_cast<char*>(a->allocate(5 * MiB, on_device1));
  char* r = static_cast<char*>(a->allocate(6 * MiB, on_device1));  // grows by 6 MiB
  void* small = a->allocate(MiB / 8, on_device1);  // the small pool: a plain 2 MiB segment
  EXPECT_EQ(q - p, static_cast<std::ptrdiff_t>(3 * MiB));
  EXPECT_EQ(r - p, static_cast<std::ptrdiff_t>(8 * MiB));
  EXPECT_EQ(a->kind_of(q), memory_kind::device);
  EXPECT_EQ(calls(log(), "vmem_address_reserve_align "),
            std::vector<std::string>{"vmem_address_reserve_align size=274877906944 "
                                     "alignment=2097152 flags=0 -> SUCCESS"});
  EXPECT_EQ(calls(log(), "vmem_handle_create ").size(), 3u) << log();
  const auto allocs = calls(log(), "pool_allocate ");
  ASSERT_EQ(allocs.size(), 1u) << log();
  EXPECT_TRUE(allocs[0].starts_with("pool_allocate node3 pool=0 size=2097152 flags=0 -> SUCCESS"))
      << allocs[0];
  const auto stats = a->memory_stats();
  EXPECT_EQ(stats.at("segment.device1.current"), 2);  // the grown one and the small one
  EXPECT_EQ(stats.at("reserved_bytes.device1.current"), static_cast<std::int64_t>(16 * MiB));
  EXPECT_EQ(a->device_memory_info(1),
            (std::pair<std::uint64_t, std::uint64_t>{kVram - 16 * MiB, kVram}));
  for (void* x : {static_cast<void*>(p), static_cast<void*>(q), static_cast<void*>(r), small})
    a->deallocate(x);
  EXPECT_EQ(a->trim(), 16 * MiB);
  EXPECT_EQ(vmem_outstanding(path_), (vmem_counts{0, 0, 0, 0}));
  EXPECT_EQ(a->device_memory_info(1), (std::pair<std::uint64_t, std::uint64_t>{kVram, kVram}));
}

TEST_F(RocrDeviceMemory, OnTheMi300aDevicePlacementsStayHostMemoryLockedForTheGpus) {
  UMEM_REQUIRE_FIXTURE(rocminfo, umem::test::kMi300aRocminfo);
  const topology mi300a = umem::test::import_capture(rocminfo);
  {
    live_machine m = machine(mi300a);
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(make_device_memory_source(*m.runtime, m.topo, d), nullptr);
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
