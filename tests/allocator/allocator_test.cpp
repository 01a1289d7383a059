// The assembled allocator: placement, spill, limits, misuse, statistics, the pmr adaptor, on this
// one-node machine (real host memory) and on 4-node models served by test doubles.
#include <gtest/gtest.h>

#include <cstring>
#include <memory_resource>
#include <thread>
#include <vector>

#include "allocator/fake_upstream.hpp"
#include "allocator/four_node_fixture.hpp"
#include "allocator/mi300a_double_fixture.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/core/error.hpp"

namespace {

using namespace umem::alloc;
using umem::errc;
using umem::alloc::test::fake_upstream;
using umem::alloc::test::four_node_allocator;

constexpr std::size_t MiB = 1u << 20;

template <typename F>
umem::error expect_error(F&& f, errc code) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e;
  }
  ADD_FAILURE() << "no umem::error thrown";
  return umem::error(errc::internal, "");
}

TEST(Allocator, LiveMachineAllocatesHostMemoryAndSaysWhyNoGpu) {
  allocator a(alloc_options{});
  EXPECT_FALSE(a.gpu_accessible()) << "no AMD GPU runtime on this machine";
  EXPECT_NE(a.describe().find("no GPU runtime"), std::string::npos) << a.describe();
  auto* p = static_cast<unsigned char*>(a.allocate(3 * MiB + 5));
  std::memset(p, 0xab, 3 * MiB + 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  EXPECT_GE(a.allocation_size(p), 3 * MiB + 5);
  const auto r = a.residency(p, 3 * MiB);
  std::size_t present = 0;
  for (const auto& [node, pages] : r.pages_per_node) present += pages;
  EXPECT_EQ(present, r.total_pages) << "every touched page is resident";
  EXPECT_EQ(r.gpu_accessible, false);
  const auto stats = a.memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), static_cast<std::int64_t>(a.allocation_size(p)));
  EXPECT_EQ(stats.at("allocation.all.current"), 1);
  a.deallocate(p);
  EXPECT_EQ(a.memory_stats().at("allocated_bytes.all.current"), 0);
  EXPECT_GT(a.trim(), 0u);
  EXPECT_EQ(a.memory_stats().at("reserved_bytes.all.current"), 0);
}

TEST(Allocator, MisuseIsReportedAndChangesNothing) {
  allocator a(alloc_options{});
  expect_error([&] { a.allocate(0); }, errc::invalid_argument);
  expect_error([&] { a.allocate(SIZE_MAX); }, errc::invalid_argument);
  int on_stack = 0;
  const auto foreign = expect_error([&] { a.deallocate(&on_stack); }, errc::invalid_argument);
  EXPECT_NE(std::string(foreign.what()).find("not allocated by this umem allocator"),
            std::string::npos);
  void* p = a.allocate(1000);
  void* q = a.allocate(1000);  // keeps the segment alive so p's block stays known as free
  a.deallocate(p);
  const auto twice = expect_error([&] { a.deallocate(p); }, errc::invalid_argument);
  EXPECT_NE(std::string(twice.what()).find("double free"), std::string::npos) << twice.what();
  EXPECT_EQ(a.memory_stats().at("allocation.all.current"), 1);
  a.deallocate(q);
  const auto unknown = expect_error([&] { a.allocate(64, {placement{placement_kind::node, 7, {}}, {}}); },
                                    errc::invalid_argument);
  EXPECT_NE(std::string(unknown.what()).find("7"), std::string::npos) << unknown.what();
  a.deallocate(nullptr);
}

TEST(Allocator, PolicyDecidesTheBindingOfEverySegment) {
  four_node_allocator f("policy:node:2");
  void* p = f.a->allocate(MiB);
  EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::bind, {2}}));
  void* q = f.a->allocate(MiB, {placement{placement_kind::interleave, -1, {0, 3}}, {}});
  EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::interleave, {0, 3}}));
  void* c = f.a->allocate(8 * MiB, {std::nullopt, umem::coherence::coarse});
  EXPECT_EQ(f.upstream->last_kind(), umem::coherence::coarse);
  EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::bind, {2}}));
  const auto stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("allocation.node2_fine.current"), 1);
  EXPECT_EQ(stats.at("allocation.node2_coarse.current"), 1);
  EXPECT_EQ(stats.at("allocation.all.current"), 3);
  for (void* x : {p, q, c}) f.a->deallocate(x);
}

TEST(Allocator, ABlockFreedOnOneNodeIsNeverReusedForAnother) {
  four_node_allocator f("");
  void* on1 = f.a->allocate(MiB, {placement{placement_kind::node, 1, {}}, {}});
  f.a->deallocate(on1);
  const auto calls = f.upstream->allocate_calls();
  void* on3 = f.a->allocate(MiB, {placement{placement_kind::node, 3, {}}, {}});
  EXPECT_EQ(f.upstream->allocate_calls(), calls + 1) << "node 3 needs its own segment";
  EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::bind, {3}}));
  void* again1 = f.a->allocate(MiB, {placement{placement_kind::node, 1, {}}, {}});
  EXPECT_EQ(again1, on1) << "node 1's cached block is reused for node 1";
  f.a->deallocate(on3);
  f.a->deallocate(again1);
}

TEST(Allocator, SpillNeverFailsWithTheNodeAndLeaksNothing) {
  four_node_allocator f("policy:node:1,limit.node1:4MiB");
  void* a = f.a->allocate(4 * MiB);
  const auto e = expect_error([&] { f.a->allocate(2 * MiB); }, errc::out_of_memory);
  EXPECT_NE(std::string(e.what()).find("limit.node1"), std::string::npos) << e.what();
  EXPECT_EQ(f.a->memory_stats().at("allocation.all.current"), 1) << "no partial allocation";
  EXPECT_EQ(f.upstream->outstanding_bytes(), 4 * MiB);
  f.a->deallocate(a);
}

TEST(Allocator, SpillWarnTakesTheNearestNodeAndCountsIt) {
  four_node_allocator f("policy:node:1,limit.node1:4MiB,spill:warn");
  void* a = f.a->allocate(4 * MiB);
  void* b = f.a->allocate(2 * MiB);
  // Distances from node 1 are 32 to every other node: ties go to the lowest index, node 0.
  EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::bind, {0}}));
  const auto stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("spills"), 1);
  EXPECT_EQ(stats.at("spills.node1_fine"), 1);
  EXPECT_EQ(stats.at("allocation.node0_fine.current"), 1);
  f.a->deallocate(a);
  f.a->deallocate(b);
}

TEST(Allocator, TotalLimitTrimsTheCacheBeforeFailing) {
  four_node_allocator f("policy:node:0,limit.total:8MiB");
  void* a = f.a->allocate(6 * MiB);
  f.a->deallocate(a);  // cached: 6 MiB reserved, 0 allocated
  void* b = f.a->allocate(2 * MiB + 1, {placement{placement_kind::node, 2, {}}, {}});
  // 6 MiB cached on node 0 + 4 MiB would pass the 8 MiB limit: the cache must be trimmed first.
  EXPECT_EQ(f.upstream->outstanding_bytes(), 4 * MiB);
  EXPECT_EQ(f.a->memory_stats().at("reserved_bytes.all.current"), 4 * MiB);
  f.a->deallocate(b);
}

// The first pool runs without the global peak tracker; when a second pool appears it must join
// with the first pool's values so that the total's peak stays the peak of the sum. Thread caches
// off: exact peaks (with them a cached block would still count, Note [Statistics with thread
// caches]).
TEST(Allocator, TotalPeakStaysThePeakOfTheSumWhenASecondPoolAppears) {
  four_node_allocator f("policy:node:0,thread_cache:0");
  void* a = f.a->allocate(4 * MiB);
  EXPECT_EQ(f.a->memory_stats().at("allocated_bytes.all.peak"), 4 * MiB);
  f.a->deallocate(a);
  void* b = f.a->allocate(4 * MiB, {placement{placement_kind::node, 1, {}}, {}});
  auto stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), 4 * MiB);
  EXPECT_EQ(stats.at("allocated_bytes.all.peak"), 4 * MiB) << "pools peaked one after the other";
  void* c = f.a->allocate(2 * MiB);  // node 0 again, from its cached segment
  stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.all.peak"), 6 * MiB);
  EXPECT_EQ(stats.at("allocated_bytes.node0_fine.peak"), 4 * MiB);
  EXPECT_EQ(stats.at("allocation.all.allocated"), 3);
  f.a->deallocate(b);
  f.a->deallocate(c);
  f.a->reset_peak_stats();
  EXPECT_EQ(f.a->memory_stats().at("allocated_bytes.all.peak"), 0);
}

// Note [Fast front end]: a free tries the newest pool's thread cache first, then the older
// pools' caches; a block of an older pool still goes into its thread's cache and is reused.
TEST(Allocator, ABlockOfAnOlderPoolGoesIntoItsThreadCache) {
  // A slab object (where the upstream's segments are aligned to a slab) and a block.
  for (const std::size_t size : {std::size_t{4096}, std::size_t{8192}}) {
    SCOPED_TRACE(size);
    four_node_allocator f("policy:node:0");
    void* x = f.a->allocate(size);  // node 0's pool, the policy's: the first pool
    void* y = f.a->allocate(size, {placement{placement_kind::node, 1, {}}, {}});  // the newest
    f.a->deallocate(x);
    bool x_thread_cached = false;
    for (const auto& r : f.a->pool_reports(true))
      for (const auto& seg : r.snapshot.segments)
        for (const auto& b : seg.blocks)
          if (seg.base + b.offset == reinterpret_cast<std::uintptr_t>(x))
            x_thread_cached = b.thread_cached;
    EXPECT_TRUE(x_thread_cached) << "x waits in node 0's cache of this thread";
    EXPECT_EQ(f.a->allocate(size), x);
    f.a->deallocate(y);
    f.a->deallocate(x);
    EXPECT_THROW(f.a->deallocate(x), umem::error) << "a double free is still caught";
    const auto stats = f.a->memory_stats();
    EXPECT_EQ(stats.at("allocation.all.current"), 0);
    EXPECT_EQ(stats.at("allocation.all.allocated"), 3);
    EXPECT_EQ(stats.at("requested_bytes.all.freed"), static_cast<std::int64_t>(3 * size));
  }
}

// The front end asks only the cache its thread used last (Note [Fast front end]): a thread that
// alternates between two pools must still be served from both caches, through the slow path.
TEST(Allocator, AThreadAlternatingBetweenPoolsIsServedFromBothCaches) {
  four_node_allocator f("policy:node:0");
  const request node1{placement{placement_kind::node, 1, {}}, {}};
  void* x = f.a->allocate(8192);
  void* y = f.a->allocate(8192, node1);
  for (int i = 0; i < 10; ++i) {
    f.a->deallocate(x);
    f.a->deallocate(y);
    EXPECT_EQ(f.a->allocate(8192), x) << "round " << i;
    EXPECT_EQ(f.a->allocate(8192, node1), y) << "round " << i;
  }
  const auto stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("cache_hits"), 20);
  EXPECT_EQ(stats.at("allocation.all.allocated"), 22);
  f.a->deallocate(x);
  f.a->deallocate(y);
  EXPECT_EQ(f.a->memory_stats().at("allocation.all.current"), 0);
}

// allocate_cached() is allocate()'s first step alone, for a fixed policy (its own fast path) and
// for `local` (the slab route or the route of the calling thread's node): the thread's cached
// block or slab object, or nullptr with nothing allocated, never the pool's locked path. A slab
// (256 B, Note [Slabs] in thread_cache.hpp) serves its other objects too; a block's bin held one.
TEST(Allocator, AllocateCachedServesOnlyTheThreadsCachedBlocks) {
  for (const char* policy : {"policy:node:0", "policy:local"})
    for (const std::size_t size : {std::size_t{256}, std::size_t{8192}}) {
      SCOPED_TRACE(std::string(policy) + " " + std::to_string(size));
      const bool slab = size == 256;
      four_node_allocator f(policy);
      EXPECT_EQ(f.a->allocate_cached(size), nullptr) << "nothing is cached yet";
      EXPECT_EQ(f.a->memory_stats().at("allocation.all.allocated"), 0);
      void* x = f.a->allocate(size);
      f.a->deallocate(x);
      EXPECT_EQ(f.a->allocate_cached(size), x);
      void* next = f.a->allocate_cached(size);
      if (slab) {
        EXPECT_NE(next, nullptr) << "the slab's other objects";
      } else {
        EXPECT_EQ(next, nullptr) << "the cache held one block";
      }
      EXPECT_NE(next, x);
      const auto stats = f.a->memory_stats();
      EXPECT_EQ(stats.at("allocation.all.current"), slab ? 2 : 1);
      EXPECT_EQ(stats.at("allocation.all.allocated"), slab ? 3 : 2);
      if (!slab) {
        EXPECT_EQ(stats.at("cache_hits"), 1);
      }
      f.a->deallocate(x);
      f.a->deallocate(next);
      EXPECT_EQ(f.a->memory_stats().at("allocation.all.current"), 0);
    }
}

// Threads allocate through the default route and explicit nodes (creating pools while others
// free), each freeing its own blocks: no block is handed out twice and the totals add up.
TEST(Allocator, ThreadsSharingTheFrontEndKeepBlocksApartAndStatsExact) {
  four_node_allocator f("policy:node:0");
  constexpr int threads = 4;
  constexpr int rounds = 400;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, unsigned char>> live;
      for (int i = 0; i < rounds; ++i) {
        const std::size_t bytes = 256u << (i % 8);
        request r;
        if (i % 3 == 1) r.where = placement{placement_kind::node, (t + i) % 4, {}};
        auto* p = static_cast<unsigned char*>(f.a->allocate(bytes, r));
        const auto mark = static_cast<unsigned char>(t * 61 + i);
        std::memset(p, mark, bytes);
        live.emplace_back(p, mark);
        if (live.size() > 8) {
          auto [q, m] = live.front();
          EXPECT_EQ(q[0], m) << "a block was handed to two holders";
          f.a->deallocate(q);
          live.erase(live.begin());
        }
      }
      for (auto [q, m] : live) {
        EXPECT_EQ(q[0], m);
        f.a->deallocate(q);
      }
    });
  for (auto& w : workers) w.join();
  const auto stats = f.a->memory_stats();
  EXPECT_EQ(stats.at("allocation.all.current"), 0);
  EXPECT_EQ(stats.at("allocation.all.allocated"), threads * rounds);
  EXPECT_EQ(stats.at("allocation.all.freed"), threads * rounds);
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), 0);
}

TEST(Allocator, PmrContainersUseUmemMemory) {
  four_node_allocator f("policy:node:3");
  pmr_resource res(*f.a);
  {
    std::pmr::vector<int> v(&res);
    for (int i = 0; i < 100000; ++i) v.push_back(i);
    EXPECT_GT(f.a->memory_stats().at("allocated_bytes.all.current"), 0);
    EXPECT_EQ(f.upstream->last_binding(), (node_binding{bind_mode::bind, {3}}));
    EXPECT_EQ(v[99999], 99999);
  }
  EXPECT_EQ(f.a->memory_stats().at("allocated_bytes.all.current"), 0);
  expect_error([&] { (void)res.allocate(64, 4096); }, errc::unsupported);
  pmr_resource other(*f.a);
  EXPECT_TRUE(res.is_equal(other));
  EXPECT_FALSE(res.is_equal(*std::pmr::new_delete_resource()));
}

// The whole stack on the replayed 4-socket MI300A: each socket's memory goes to that socket's
// CPU fine pool, visible to exactly that socket's GPU, and returns cleanly.
class AllocatorOnMi300aDouble : public umem::alloc::test::GpuMapperDouble {};

TEST_F(AllocatorOnMi300aDouble, EachSocketsMemoryIsLockedForItsOwnGpu) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  auto up = std::make_unique<fake_upstream>(0, 2 * MiB, 4096);  // nodes 1-3 do not exist here
  allocator a(alloc_options{}, topo_, std::move(up), std::move(mapper_));
  EXPECT_TRUE(a.gpu_accessible());
  for (int node = 0; node < 4; ++node) {
    void* p = a.allocate(MiB, {placement{placement_kind::device, node, {}}, umem::coherence::fine});
    const auto l = take_log();
    ASSERT_EQ(l.size(), 1u) << log();
    // CPU agent of socket N = KFD node N, its FINE pool is its pool 0; GPU N = KFD node 4+N.
    const std::regex lock("memory_lock_to_pool size=2097152 pool=node" + std::to_string(node) +
                          "/0 flags=0 agents=node" + std::to_string(4 + node) + " -> SUCCESS l[0-9]+");
    EXPECT_TRUE(std::regex_match(l[0], lock)) << l[0];
    a.deallocate(p);
  }
  EXPECT_EQ(a.trim(), 4 * 2 * MiB);
  const auto l = take_log();
  EXPECT_EQ(l.size(), 4u) << log();
  for (const auto& line : l) EXPECT_EQ(line.rfind("memory_unlock ", 0), 0u) << line;
}

// A device placement that names no kind is coarse-grained (alloc_options::device_kind): the
// socket's CPU coarse pool (pool 3 of the capture's CPU agents), for that socket's GPU only; a
// placement on the node itself keeps `kind` (fine, pool 0).
TEST_F(AllocatorOnMi300aDouble, DeviceMemoryIsCoarseGrainedByDefault) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  auto up = std::make_unique<fake_upstream>(0, 2 * MiB, 4096);
  allocator a(alloc_options{}, topo_, std::move(up), std::move(mapper_));
  void* d = a.allocate(MiB, {placement{placement_kind::device, 2, {}}, {}});
  auto l = take_log();
  ASSERT_EQ(l.size(), 1u) << log();
  EXPECT_TRUE(std::regex_match(
      l[0], std::regex("memory_lock_to_pool size=2097152 pool=node2/3 flags=0 agents=node6 "
                       "-> SUCCESS l[0-9]+")))
      << l[0];
  void* h = a.allocate(MiB, {placement{placement_kind::node, 2, {}}, {}});
  l = take_log();
  ASSERT_EQ(l.size(), 1u) << log();
  EXPECT_NE(l[0].find("pool=node2/0 "), std::string::npos) << l[0];
  const auto stats = a.memory_stats();
  EXPECT_EQ(stats.at("allocated_bytes.node2_coarse.current"), static_cast<std::int64_t>(MiB));
  EXPECT_EQ(stats.at("allocated_bytes.node2_fine.current"), static_cast<std::int64_t>(MiB));
  a.deallocate(d);
  a.deallocate(h);
}

}  // namespace
