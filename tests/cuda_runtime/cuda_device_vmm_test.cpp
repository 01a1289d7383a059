// cuda_device_source's growable segments through the CUDA double's virtual memory API (Note
// [Growable device segments] in cuda_device_source.hpp): a reservation with its first part mapped,
// growth in place (one handle per 2 MiB chunk), the reservation's end, chunks given back and
// mapped again, out of memory and half-done growths, every handle released at deallocate, a
// caching_pool growing one segment and giving back its free chunks, and the
// cuMemAlloc path where the device or the driver has no VMM. The served H200 has kBudget of
// device memory; the double's granularity is 2 MiB.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <thread>
#include <vector>

#include "cuda_test_env.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/gpu/cuda_device_source.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_discovery.hpp"

namespace umem::alloc {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t kBudget = 64 * MiB;
namespace res = cuda::cuda_compat::result;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

long long bytes(std::size_t n) { return static_cast<long long>(n); }

// `f` throws umem::error(`code`) whose message holds every one of `parts`.
template <class F>
void expect_error(F&& f, errc code, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one saying " << *parts.begin();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const char* part : parts) EXPECT_TRUE(contains(e.what(), part)) << e.what();
  }
}

// The double's call log after the source's "retain 0".
std::string calls_after_retain() {
  const std::string log = test::cuda_double_log();
  const std::string first = "retain 0\n";
  return log.rfind(first, 0) == 0 ? log.substr(first.size()) : log;
}

class CudaDeviceVmm : public ::testing::Test {
 protected:
  // `candidates`: the double to load (the full one, or the one without VMM symbols).
  void serve(const std::vector<std::string>& candidates = test::cuda_double_candidates()) {
    topology machine = test::h200_machine();
    machine.agents[0].cuda->total_memory_bytes = kBudget;
    served_ = std::make_unique<test::cuda_double_machine>(machine);
    drv_ = std::make_shared<const cuda::cuda_driver>(cuda::cuda_driver::load_from(candidates));
    topo_ = {};
    cuda::discover_cuda(topo_, *drv_);
    ASSERT_EQ(topo_.gpus().size(), 1u);
  }
  void SetUp() override { serve(); }
  std::unique_ptr<cuda_device_source> source() {
    return std::make_unique<cuda_device_source>(drv_, *topo_.gpus()[0]);
  }

  std::unique_ptr<test::cuda_double_machine> served_;
  std::shared_ptr<const cuda::cuda_driver> drv_;
  topology topo_;
};

TEST_F(CudaDeviceVmm, AGrowableSegmentIsAReservationWithItsFirstPartMapped) {
  auto src = source();
  EXPECT_EQ(src->chunk_size(), 2 * MiB);
  const segment s = src->allocate_growable(3 * MiB, 15 * MiB, {}, coherence::coarse);
  EXPECT_EQ(s.size, 4 * MiB);            // 3 MiB in 2 MiB chunks
  EXPECT_EQ(s.reserved_size, 16 * MiB);  // 15 MiB in 2 MiB chunks
  EXPECT_EQ(test::current_context(*drv_), nullptr) << "the thread's (empty) context is restored";
  EXPECT_EQ(calls_after_retain(),
            "address_reserve a1 16777216\nmem_create h2 2097152\nmem_map a1+0 2097152 h2\n"
            "mem_create h3 2097152\nmem_map a1+2097152 2097152 h3\n"
            "set_access a1+0 4194304 0x3\n");
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(4 * MiB)) << "only the mapped part";
  EXPECT_EQ(src->memory_info(), (std::pair<std::uint64_t, std::uint64_t>{60 * MiB, kBudget}));
  std::memset(s.base, 0x5a, s.size);  // mapped read/write (the double's memory is host memory)
  EXPECT_TRUE(contains(src->describe(), "growable segments through the virtual memory API "
                                        "(cuMemCreate/cuMemMap, 2 MiB chunks)"))
      << src->describe();
  src->deallocate(s);
}

TEST_F(CudaDeviceVmm, GrowMapsMoreAtTheEndAndKeepsTheBaseAndTheContents) {
  auto src = source();
  segment s = src->allocate_growable(4 * MiB, 32 * MiB, {}, coherence::coarse);
  void* const base = s.base;
  std::memset(base, 0x11, s.size);
  ASSERT_TRUE(src->grow(s, 5 * MiB));
  EXPECT_EQ(s.base, base);
  EXPECT_EQ(s.size, 10 * MiB);  // 4 MiB + 5 MiB rounded up to 6 MiB
  EXPECT_EQ(s.reserved_size, 32 * MiB);
  EXPECT_EQ(static_cast<unsigned char*>(base)[4 * MiB - 1], 0x11) << "the first part is kept";
  static_cast<unsigned char*>(base)[10 * MiB - 1] = 0x22;  // the growth is mapped read/write
  EXPECT_TRUE(contains(test::cuda_double_log(),
                       "mem_create h4 2097152\nmem_map a1+4194304 2097152 h4\n"
                       "mem_create h5 2097152\nmem_map a1+6291456 2097152 h5\n"
                       "mem_create h6 2097152\nmem_map a1+8388608 2097152 h6\n"
                       "set_access a1+4194304 6291456 0x3\n"))
      << test::cuda_double_log();
  EXPECT_EQ(test::cuda_double_vmm_handles(), 5);  // one per chunk
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(10 * MiB));
  ASSERT_TRUE(src->grow(s, 0));
  EXPECT_EQ(s.size, 10 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 5) << "growing by 0 maps nothing";
  src->deallocate(s);
}

TEST_F(CudaDeviceVmm, AnExhaustedReservationRefusesToGrowAndChangesNothing) {
  auto src = source();
  segment s = src->allocate_growable(4 * MiB, 8 * MiB, {}, coherence::coarse);
  ASSERT_TRUE(src->grow(s, 4 * MiB));
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_FALSE(src->grow(s, 1));
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 4);
  segment plain = src->allocate(4 * MiB, {}, coherence::coarse);
  EXPECT_EQ(plain.reserved_size, 0u);
  EXPECT_FALSE(src->grow(plain, 2 * MiB)) << "a cuMemAlloc segment cannot grow";
  EXPECT_EQ(plain.size, 4 * MiB);
  src->deallocate(plain);
  src->deallocate(s);
}

TEST_F(CudaDeviceVmm, AReservationNoLargerThanTheRequestIsAPlainCuMemAlloc) {
  auto src = source();
  const segment s = src->allocate_growable(3 * MiB, 4 * MiB, {}, coherence::coarse);
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(s.reserved_size, 0u);
  EXPECT_EQ(calls_after_retain(), "mem_alloc d1 4194304\n");
  src->deallocate(s);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, DeallocateSynchronizesThenReleasesEveryRangeAndTheReservation) {
  {
    auto src = source();
    segment s = src->allocate_growable(2 * MiB, 16 * MiB, {}, coherence::coarse);
    ASSERT_TRUE(src->grow(s, 2 * MiB));
    ASSERT_TRUE(src->grow(s, 4 * MiB));
    EXPECT_EQ(test::cuda_double_vmm_handles(), 4);
    const std::size_t before = test::cuda_double_log().size();
    src->deallocate(s);
    EXPECT_EQ(test::cuda_double_log().substr(before),
              "synchronize 0\n"
              "mem_unmap a1+0 2097152\nmem_release h2\n"
              "mem_unmap a1+2097152 2097152\nmem_release h3\n"
              "mem_unmap a1+4194304 2097152\nmem_release h4\n"
              "mem_unmap a1+6291456 2097152\nmem_release h5\n"
              "address_free a1\n");
    EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
    EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
  }
  EXPECT_EQ(test::cuda_double_retains(0), 0);
}

TEST_F(CudaDeviceVmm, DecommitUnmapsWholeChunksAfterASyncAndRecommitMapsThemAgain) {
  auto src = source();
  const segment s = src->allocate_growable(8 * MiB, 16 * MiB, {}, coherence::coarse);  // h2-h5
  auto* const base = static_cast<unsigned char*>(s.base);
  std::size_t before = test::cuda_double_log().size();
  ASSERT_TRUE(src->decommit(s, base + 2 * MiB, 4 * MiB));
  EXPECT_EQ(test::cuda_double_log().substr(before),
            "synchronize 0\nmem_unmap a1+2097152 2097152\nmem_release h3\n"
            "mem_unmap a1+4194304 2097152\nmem_release h4\n");
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(4 * MiB));
  EXPECT_EQ(test::cuda_double_vmm_handles(), 2);
  EXPECT_EQ(test::current_context(*drv_), nullptr);

  // Not whole mapped chunks: refused without a driver call.
  before = test::cuda_double_log().size();
  EXPECT_FALSE(src->decommit(s, base + 1 * MiB, 2 * MiB)) << "not on a chunk";
  EXPECT_FALSE(src->decommit(s, base, 3 * MiB)) << "not whole chunks";
  EXPECT_FALSE(src->decommit(s, base, 4 * MiB)) << "a given-back chunk inside";
  EXPECT_FALSE(src->decommit(s, base + 16 * MiB, 2 * MiB)) << "past what was ever mapped";
  EXPECT_EQ(test::cuda_double_log().size(), before);

  before = test::cuda_double_log().size();
  src->recommit(s, base, 8 * MiB);  // maps the hole only
  EXPECT_EQ(test::cuda_double_log().substr(before),
            "mem_create h6 2097152\nmem_map a1+2097152 2097152 h6\n"
            "mem_create h7 2097152\nmem_map a1+4194304 2097152 h7\n"
            "set_access a1+2097152 4194304 0x3\n");
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(8 * MiB));
  std::memset(base, 1, 8 * MiB);  // all of it mapped read/write again
  before = test::cuda_double_log().size();
  src->recommit(s, base, 8 * MiB);
  EXPECT_EQ(test::cuda_double_log().size(), before) << "nothing given back: nothing to map";

  const segment plain = src->allocate(4 * MiB, {}, coherence::coarse);
  EXPECT_FALSE(src->decommit(plain, plain.base, 2 * MiB)) << "a cuMemAlloc segment keeps its pages";
  src->deallocate(plain);
  src->deallocate(s);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, ARecommitWithoutDeviceMemoryIsOutOfMemoryAndKeepsTheHole) {
  auto src = source();
  const segment s = src->allocate_growable(8 * MiB, 16 * MiB, {}, coherence::coarse);
  auto* const base = static_cast<unsigned char*>(s.base);
  ASSERT_TRUE(src->decommit(s, base + 4 * MiB, 4 * MiB));
  test::cuda_double_fail_next("cuMemCreate", res::out_of_memory);
  expect_error([&] { src->recommit(s, base + 4 * MiB, 4 * MiB); }, errc::out_of_memory,
               {"has no room for 4194304 bytes: cuMemCreate failed"});
  EXPECT_EQ(test::cuda_double_vmm_handles(), 2);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(4 * MiB));
  src->recommit(s, base + 4 * MiB, 4 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 4);
  src->deallocate(s);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
}

TEST_F(CudaDeviceVmm, AGrowthTheCallerDidNotSeeIsNotMappedTwice) {
  auto src = source();
  segment s = src->allocate_growable(2 * MiB, 16 * MiB, {}, coherence::coarse);
  segment stale = s;
  ASSERT_TRUE(src->grow(s, 4 * MiB));
  ASSERT_TRUE(src->grow(stale, 2 * MiB));  // inside what is mapped already
  EXPECT_EQ(stale.size, 4 * MiB);
  ASSERT_TRUE(src->grow(stale, 4 * MiB));  // 2 MiB of it mapped already, 2 MiB new
  EXPECT_EQ(stale.size, 8 * MiB);
  EXPECT_EQ(test::cuda_double_calls("mem_create "), 4);
  EXPECT_TRUE(contains(test::cuda_double_log(), "mem_map a1+6291456 2097152 h5\n"))
      << test::cuda_double_log();
  src->deallocate(stale);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
}

TEST_F(CudaDeviceVmm, OutOfDeviceMemoryInCuMemCreateIsOutOfMemoryAndLeavesNothingBehind) {
  auto src = source();
  const segment held = src->allocate(48 * MiB, {}, coherence::coarse);
  expect_error([&] { (void)src->allocate_growable(32 * MiB, 128 * MiB, {}, coherence::coarse); },
               errc::out_of_memory,
               {"CUDA device 0 (NVIDIA H200) has no room for 33554432 bytes: cuMemCreate failed: "
                "CUDA_ERROR_OUT_OF_MEMORY",
                "cuMemGetInfo: 16777216 of 67108864 bytes free"});
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0) << "the address space is given back";
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);

  segment s = src->allocate_growable(8 * MiB, 64 * MiB, {}, coherence::coarse);
  // 56 MiB in use: 8 MiB left.
  expect_error([&] { (void)src->grow(s, 16 * MiB); }, errc::out_of_memory,
               {"has no room for 16777216 bytes: cuMemCreate failed",
                "cuMemGetInfo: 8388608 of 67108864 bytes free"});
  EXPECT_EQ(s.size, 8 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 4) << "the 4 chunks the growth made are released";
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(56 * MiB));
  src->deallocate(s);
  src->deallocate(held);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, AHalfDoneGrowthReleasesWhatItMade) {
  auto src = source();
  segment s = src->allocate_growable(4 * MiB, 32 * MiB, {}, coherence::coarse);

  test::cuda_double_fail_next("cuMemMap", res::out_of_memory);
  expect_error([&] { (void)src->grow(s, 4 * MiB); }, errc::out_of_memory,
               {"has no room for 4194304 bytes: cuMemMap failed"});
  EXPECT_TRUE(contains(test::cuda_double_log(), "mem_create h4 2097152\nmem_release h4\n"))
      << test::cuda_double_log();

  test::cuda_double_fail_next("cuMemSetAccess", res::unknown);
  expect_error([&] { (void)src->grow(s, 4 * MiB); }, errc::runtime_error,
               {"cuMemSetAccess of 4194304 bytes on CUDA device 0 (NVIDIA H200) failed: "
                "CUDA_ERROR_UNKNOWN"});
  EXPECT_TRUE(contains(test::cuda_double_log(),
                       "mem_map a1+4194304 2097152 h5\nmem_create h6 2097152\n"
                       "mem_map a1+6291456 2097152 h6\nmem_unmap a1+4194304 2097152\n"
                       "mem_release h5\nmem_unmap a1+6291456 2097152\nmem_release h6\n"))
      << test::cuda_double_log();
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 2);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(4 * MiB));

  ASSERT_TRUE(src->grow(s, 4 * MiB)) << "the same range maps once the driver lets it";
  EXPECT_EQ(s.size, 8 * MiB);
  src->deallocate(s);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
}

TEST_F(CudaDeviceVmm, NoAddressSpaceIsOutOfMemoryAndOtherFailuresNameTheCall) {
  auto src = source();
  const auto growable = [&] {
    (void)src->allocate_growable(2 * MiB, 1024 * MiB, {}, coherence::coarse);
  };
  test::cuda_double_fail_next("cuMemAddressReserve", res::out_of_memory);
  expect_error(growable, errc::out_of_memory,
               {"has no room for 1073741824 bytes: cuMemAddressReserve failed"});
  test::cuda_double_fail_next("cuMemCreate", res::invalid_value);
  expect_error(growable, errc::runtime_error,
               {"cuMemCreate of 2097152 bytes on CUDA device 0 (NVIDIA H200) failed: "
                "CUDA_ERROR_INVALID_VALUE"});
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
}

TEST_F(CudaDeviceVmm, ThreadsGrowAndFreeTheirOwnSegmentsAtOnce) {
  auto src = source();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        segment s = src->allocate_growable(2 * MiB, 8 * MiB, {}, coherence::coarse);
        EXPECT_TRUE(src->grow(s, 2 * MiB));
        EXPECT_TRUE(src->grow(s, 4 * MiB));
        EXPECT_FALSE(src->grow(s, 2 * MiB));
        static_cast<unsigned char*>(s.base)[s.size - 1] = 1;
        src->deallocate(s);
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(test::cuda_double_calls("mem_create "), 4 * 20 * 4);  // 2 + 2 + 4 MiB in chunks
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, ACachingPoolGrowsOneSegmentInsteadOfTakingNewOnes) {
  auto src = source();
  pool_config cfg;
  cfg.expandable_reserve_bytes = 32 * MiB;
  cfg.max_cached_bytes = 2 * MiB;  // free chunks go back before the pool maps more
  {
    caching_pool pool(*src, {}, coherence::coarse, cfg);
    void* a = pool.allocate(3 * MiB);  // a 4 MiB segment (its 1 MiB rest is not split off)
    void* b = pool.allocate(5 * MiB);  // grows it by 6 MiB
    void* c = pool.allocate(6 * MiB);  // by 6 MiB again
    EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), static_cast<std::ptrdiff_t>(4 * MiB));
    EXPECT_EQ(static_cast<char*>(c) - static_cast<char*>(a), static_cast<std::ptrdiff_t>(10 * MiB));
    const pool_stats st = pool.stats();
    EXPECT_EQ(st(metric::segment, size_class::large_pool).current, 1);
    EXPECT_EQ(st(metric::reserved_bytes, size_class::large_pool).current, bytes(16 * MiB));
    EXPECT_EQ(st[counter::upstream_allocs], 3);
    EXPECT_EQ(test::cuda_double_vmm_reservations(), 1);
    EXPECT_EQ(test::cuda_double_vmm_handles(), 8);  // 2 MiB chunks
    EXPECT_EQ(test::cuda_double_calls("mem_alloc "), 0);
    std::memset(c, 7, 6 * MiB);
    pool.deallocate(b);
    // b's 6 MiB is too small: its 3 chunks go back (6 MiB cached > 2), then 8 MiB after c.
    void* d = pool.allocate(7 * MiB);
    EXPECT_EQ(static_cast<char*>(d) - static_cast<char*>(a), static_cast<std::ptrdiff_t>(16 * MiB));
    EXPECT_EQ(test::cuda_double_calls("mem_unmap "), 3);
    EXPECT_EQ(pool.stats()(metric::reserved_bytes, size_class::all).current, bytes(18 * MiB));
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(18 * MiB));
    pool.deallocate(a);  // merges with b's free block: [0, 10) free, [4, 10) unmapped
    void* e = pool.allocate(8 * MiB);  // fits there: [4, 8) is mapped again
    EXPECT_EQ(e, a);
    EXPECT_EQ(pool.stats()(metric::reserved_bytes, size_class::all).current, bytes(22 * MiB));
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), bytes(22 * MiB));
    std::memset(e, 9, 8 * MiB);  // mapped read/write
    for (void* p : {c, d, e}) pool.deallocate(p);
    // Entirely free and above max_cached_bytes: the grown segment goes back whole.
    EXPECT_EQ(pool.stats()(metric::reserved_bytes, size_class::all).current, 0);
    EXPECT_EQ(pool.stats()[counter::upstream_frees], 1);
  }
  EXPECT_EQ(test::cuda_double_vmm_handles(), 0);
  EXPECT_EQ(test::cuda_double_vmm_reservations(), 0);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, ADeviceWithoutVirtualMemoryManagementKeepsCuMemAlloc) {
  test::cuda_double_set_vmm_supported(false);
  auto src = source();
  EXPECT_EQ(src->chunk_size(), 0u);
  segment s = src->allocate_growable(3 * MiB, 16 * MiB, {}, coherence::coarse);
  EXPECT_EQ(s.size, 4 * MiB);
  EXPECT_EQ(s.reserved_size, 0u);
  EXPECT_FALSE(src->grow(s, 2 * MiB));
  EXPECT_EQ(calls_after_retain(), "mem_alloc d1 4194304\n");
  EXPECT_TRUE(contains(src->describe(), "segments do not grow")) << src->describe();
  src->deallocate(s);
  EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
}

TEST_F(CudaDeviceVmm, ADriverWithoutTheVirtualMemoryApiKeepsCuMemAlloc) {
  drv_.reset();
  served_.reset();
  const test::use_cuda_double_without_vmm old_driver;
  serve(test::cuda_double_no_vmm_candidates());
  EXPECT_FALSE(drv_->has_virtual_memory());
  EXPECT_EQ(drv_->fn().cuMemCreate, nullptr);
  EXPECT_NE(drv_->fn().cuMemAlloc_v2, nullptr);
  {
    auto src = source();
    EXPECT_EQ(src->chunk_size(), 0u);
    segment s = src->allocate_growable(3 * MiB, 16 * MiB, {}, coherence::coarse);
    EXPECT_EQ(s.reserved_size, 0u);
    EXPECT_FALSE(src->grow(s, 2 * MiB));
    EXPECT_EQ(calls_after_retain(), "mem_alloc d1 4194304\n");
    src->deallocate(s);
    EXPECT_EQ(test::cuda_double_device_bytes_in_use(0), 0);
  }
  drv_.reset();
  served_.reset();  // resets the double without VMM while the guard still points at it
}

}  // namespace
}  // namespace umem::alloc
