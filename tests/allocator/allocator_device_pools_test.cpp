// The allocator's device pools (Note [Device placements] in allocator.hpp) with injected fake
// device sources: which GPUs get one, ownership across threads, merged totals, no spill. The
// CUDA backend's own source is tested through the CUDA double (tests/cuda_runtime).
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "allocator/two_gpu_allocator.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"

namespace {

using namespace umem::alloc;
using umem::coherence;
using umem::errc;
using umem::alloc::test::two_gpu_allocator;

constexpr std::size_t MiB = std::size_t{1} << 20;

request on(const char* where) { return {parse_placement(where), std::nullopt}; }

TEST(AllocatorDevicePools, OnlyDiscreteGpusGetADevicePoolAndEachIsDecidedOnce) {
  two_gpu_allocator t("thread_cache:0");
  EXPECT_TRUE(t.factory_calls.empty()) << "decided on first use, not at construction";
  void* d0 = t.a->allocate(3 * MiB, on("device:0"));
  void* d1 = t.a->allocate(3 * MiB, on("device:1"));
  void* d0b = t.a->allocate(MiB / 4, {parse_placement("device:0"), umem::coherence::fine});
  EXPECT_EQ(t.a->kind_of(d0), memory_kind::device);
  EXPECT_EQ(t.a->kind_of(d0b), memory_kind::device) << "one device pool whatever the kind";
  EXPECT_EQ(t.a->kind_of(d1), memory_kind::host);
  EXPECT_EQ(t.host->last_binding(), (node_binding{bind_mode::bind, {1}})) << "GPU 1's node";
  EXPECT_EQ(t.device0->memory().outstanding_segments(), 2u);  // one large, one small segment
  EXPECT_EQ(t.host->outstanding_segments(), 1u);
  EXPECT_EQ(t.factory_calls, (std::map<int, int>{{0, 1}, {1, 1}}));
  EXPECT_EQ(t.a->device_memory_info(0),
            (std::pair<std::uint64_t, std::uint64_t>{64 * MiB - 6 * MiB, 64 * MiB}));
  EXPECT_EQ(t.a->device_memory_info(1), std::nullopt);
  EXPECT_EQ(t.factory_calls, (std::map<int, int>{{0, 1}, {1, 1}}));
  for (void* p : {d0, d1, d0b}) t.a->deallocate(p);
  EXPECT_THROW(t.a->allocate(MiB, on("device:2")), umem::error);
}

TEST(AllocatorDevicePools, ABlockFreedOnAnotherThreadFindsItsDevicePool) {
  two_gpu_allocator t("");  // the default thread cache
  void* p = t.a->allocate(MiB / 2, on("device:0"));
  std::thread([&] { t.a->deallocate(p); }).join();
  EXPECT_EQ(t.a->memory_stats().at("allocated_bytes.device0.current"), 0);
  EXPECT_THROW(t.a->deallocate(p), umem::error) << "a double free is still caught";
}

TEST(AllocatorDevicePools, TotalsAndPeaksCountDeviceAndHostPools) {
  two_gpu_allocator t("thread_cache:0");
  void* h = t.a->allocate(4 * MiB);
  void* d = t.a->allocate(8 * MiB, on("device:0"));
  t.a->deallocate(h);
  const auto s = t.a->memory_stats();
  EXPECT_EQ(s.at("allocated_bytes.device0.current"), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(s.at("allocated_bytes.all.current"), static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(s.at("allocated_bytes.all.peak"), static_cast<std::int64_t>(12 * MiB));
  EXPECT_NE(t.a->describe().find("\ndevice0: fake device memory\n"), std::string::npos)
      << t.a->describe();
  t.a->deallocate(d);
}

TEST(AllocatorDevicePools, DeviceMemoryNeverSpillsAndNodeLimitsDoNotApply) {
  two_gpu_allocator t("thread_cache:0,spill:allow,limit.node0:4MiB", 16 * MiB);
  void* big = t.a->allocate(12 * MiB, on("device:0"));  // over limit.node0: not a node's memory
  try {
    (void)t.a->allocate(8 * MiB, on("device:0"));
    FAIL() << "allocated past the device's memory";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    EXPECT_NE(std::string(e.what()).find("never spilled to host memory"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(t.host->allocate_calls(), 0u) << "nothing spilled to a node";
  EXPECT_EQ(t.device0->memory().outstanding_bytes(), 12 * MiB) << "no segment leaked";
  t.a->deallocate(big);
}

}  // namespace
