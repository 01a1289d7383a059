// The torch bridge's part of the allocator's reclaim ladder (Note [Reclaim ladder] in
// reclaim_ladder.hpp): a request that finds no memory waits for the streams still using freed
// blocks before it fails, except during a graph capture, where it neither waits nor trims; one
// failure is one out_of_memory with PyTorch's first line and one num_ooms.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "torch_bridge/bridge_fixture.hpp"
#include "umem/core/error.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace {

using namespace umem;
using umem::torch_bridge::test::fixture;

constexpr std::size_t MiB = std::size_t{1} << 20;
void* const stream_a = reinterpret_cast<void*>(std::uintptr_t{0xA000});
void* const stream_b = reinterpret_cast<void*>(std::uintptr_t{0xB000});

// 6 of the 8 MiB freed on stream A but also used on B: it waits for both streams' events.
void* hold_for_streams(torch_bridge::bridge& b) {
  void* p = b.allocate(6 * MiB, 0, stream_a);
  b.record_stream(p, stream_b);
  b.deallocate(p);
  return p;
}

TEST(bridge_reclaim, a_request_waits_for_finished_streams_before_failing) {
  fixture f(8 * MiB);
  hold_for_streams(*f.b);
  void* q = f.b->allocate(6 * MiB, 0, stream_b);  // only after the held block went back
  const torch_bridge::device_stats s = f.b->stats(0);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(f.b->memory_stats(0).at("umem.held_for_streams_bytes"), 0);
  EXPECT_EQ(f.upstream->failed_calls(), 1u) << "one failed upstream call, then the held block";
  f.b->deallocate(q);
  f.b->empty_cache(true);
}

TEST(bridge_reclaim, during_a_capture_a_failure_neither_waits_nor_trims_and_is_one_oom) {
  fixture f(8 * MiB);
  hold_for_streams(*f.b);
  f.b->capture_begin();
  int thrown = 0;
  try {
    (void)f.b->allocate(6 * MiB, 0, stream_b);
  } catch (const umem::error& e) {
    ++thrown;
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("CUDA out of memory. Tried to allocate 6.00 MiB. GPU 0 ", 0), 0u) << m;
    EXPECT_NE(m.find("allocating 6291456 bytes"), std::string::npos) << m;
  }
  f.b->capture_end();
  EXPECT_EQ(thrown, 1);
  const torch_bridge::device_stats s = f.b->stats(0);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(f.b->memory_stats(0).at("umem.held_for_streams_bytes"),
            static_cast<std::int64_t>(6 * MiB))
      << "no stream waits during the capture";
  EXPECT_EQ(f.upstream->deallocate_calls(), 0u) << "no trim during the capture";
  EXPECT_EQ(f.upstream->failed_calls(), 1u);
  f.b->empty_cache(true);
}

}  // namespace
