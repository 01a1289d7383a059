// Note [A device's sole stream] in bridge.hpp: while one stream allocates on a discrete GPU, its
// frees go straight back to the device's pool (coalesced, no events); a second stream, the
// reclaim ladder's trim and empty_cache first wait for that stream, and its frees wait in the
// cache while a trim runs; GPUs are asked whether they are discrete on first use; during a capture a second
// stream gets a segment of its own; unified GPUs and max_cached keep every free waiting.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "allocator/two_gpu_allocator.hpp"
#include "umem/machine/stream_event.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace {

using namespace umem;

constexpr std::size_t MiB = std::size_t{1} << 20;
void* const stream_a = reinterpret_cast<void*>(std::uintptr_t{0xA000});
void* const stream_b = reinterpret_cast<void*>(std::uintptr_t{0xB000});

// What the bridge did with events, per stream: an event completes only when it is waited for
// or the test says the GPU finished everything.
struct gpu_log {
  std::map<void*, int> records, waits;
  bool finished = false;
};

class logged_event final : public machine::stream_event {
 public:
  explicit logged_event(gpu_log& log) : log_(log) {}
  void record(void* stream) override {
    stream_ = stream;
    done_ = false;
    ++log_.records[stream];
  }
  bool query() override { return done_ || log_.finished; }
  void synchronize() override {
    ++log_.waits[stream_];
    done_ = true;
  }

 private:
  gpu_log& log_;
  void* stream_ = nullptr;
  bool done_ = true;
};

// GPU 0 discrete, GPU 1 unified (two_gpu_allocator.hpp), behind a bridge whose events log.
struct two_gpus {
  gpu_log log;
  alloc::test::two_gpu_allocator machine;
  std::unique_ptr<torch_bridge::bridge> b;
  explicit two_gpus(const std::string& conf = "")
      : machine(conf, std::size_t{1} << 30),
        b(std::make_unique<torch_bridge::bridge>(
            std::move(machine.a), [this](int) { return std::make_unique<logged_event>(log); },
            true, "")) {}
  alloc::test::fake_device_source* source() const { return machine.device0; }
  std::int64_t stat(int device, const std::string& key) const {
    return b->memory_stats(device).at(key);
  }
  std::int64_t reserved(int device) const { return stat(device, "reserved_bytes.all.current"); }
  std::int64_t held(int device) const { return stat(device, "umem.held_for_streams_bytes"); }
};

TEST(bridge_sole_stream, frees_go_straight_back_and_coalesce_without_events) {
  two_gpus g;
  g.b->deallocate(g.b->allocate(8 * MiB, 0, stream_a));  // one 8 MiB segment, free
  const std::int64_t reserved = g.reserved(0);
  void* x = g.b->allocate(4 * MiB, 0, stream_a);  // both halves of that segment
  void* y = g.b->allocate(4 * MiB, 0, stream_a);
  EXPECT_EQ(g.reserved(0), reserved);
  g.b->deallocate(x);
  g.b->deallocate(y);
  EXPECT_EQ(g.held(0), 0) << "nothing waits: only stream A takes from this pool";
  void* z = g.b->allocate(8 * MiB, 0, stream_a);  // fits only in x and y coalesced
  EXPECT_EQ(g.reserved(0), reserved) << "served from the freed blocks, the pool did not grow";
  EXPECT_TRUE(g.log.records.empty()) << "no event was recorded";
  g.b->deallocate(z);
}

TEST(bridge_sole_stream, a_second_stream_waits_for_the_first_once_then_frees_wait_again) {
  two_gpus g;
  void* x = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->deallocate(x);
  void* y = g.b->allocate(4 * MiB, 0, stream_b);
  EXPECT_EQ(g.log.waits[stream_a], 1) << "stream A's queued work was waited for";
  EXPECT_EQ(y, x) << "after the wait, A's block is B's to take";
  void* z = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->deallocate(z);
  EXPECT_EQ(g.held(0), static_cast<std::int64_t>(4 * MiB)) << "two streams: A's free waits";
  void* w = g.b->allocate(4 * MiB, 0, stream_b);
  EXPECT_NE(w, z) << "B never gets a block A's pending work may use";
  EXPECT_EQ(g.log.waits[stream_a], 1) << "the sole stream was waited for once";
  for (void* p : {y, w}) g.b->deallocate(p);
}

TEST(bridge_sole_stream, during_a_capture_a_second_stream_gets_a_segment_of_its_own) {
  two_gpus g;
  void* x = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->deallocate(x);
  const std::int64_t reserved = g.reserved(0);
  g.b->capture_begin();
  void* y = g.b->allocate(4 * MiB, 0, stream_b);
  EXPECT_TRUE(g.log.waits.empty()) << "no event is waited for during a capture";
  EXPECT_NE(y, x) << "A's freed block may still be in use by A";
  EXPECT_GT(g.reserved(0), reserved) << "a segment of its own";
  g.b->capture_end();
  void* z = g.b->allocate(8 * MiB, 0, stream_b);
  EXPECT_EQ(g.log.waits[stream_a], 1) << "outside the capture, B's next request waits for A";
  for (void* p : {y, z}) g.b->deallocate(p);
}

TEST(bridge_sole_stream, empty_cache_waits_for_the_sole_stream_before_giving_memory_back) {
  two_gpus g;
  void* x = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->deallocate(x);
  ASSERT_GT(g.reserved(0), 0);
  g.b->empty_cache(false);
  EXPECT_EQ(g.log.waits[stream_a], 1);
  EXPECT_EQ(g.reserved(0), 0);
  void* y = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->deallocate(y);
  g.b->empty_cache(true);  // the caller says the device is synchronized: nothing to wait for
  EXPECT_EQ(g.log.waits[stream_a], 1);
  EXPECT_EQ(g.reserved(0), 0);
}

TEST(bridge_sole_stream, a_free_during_a_trim_waits_in_the_cache_and_later_ones_go_straight) {
  // The trim gives memory back outside the bridge's lock: a straight free meanwhile could reach a
  // segment it gives back while the stream still uses the block.
  for (const bool synchronized : {false, true}) {
    SCOPED_TRACE(synchronized ? "empty_cache(true)" : "empty_cache(false)");
    two_gpus g("expandable_segments:false");
    void* x = g.b->allocate(4 * MiB, 0, stream_a);                // live
    g.b->deallocate(g.b->allocate(64 * MiB, 0, stream_a));  // a segment of its own, free
    // While the trim gives the free segment back (the pool's lock held), another thread frees x.
    // Straight to the pool it would wait for that lock: so it must be done within a second.
    bool freed_during_trim = false;
    std::thread other;
    g.source()->on_deallocate = [&] {
      if (other.joinable()) return;
      std::packaged_task<void()> free_x([&] { g.b->deallocate(x); });
      auto done = free_x.get_future();
      other = std::thread(std::move(free_x));
      freed_during_trim = done.wait_for(std::chrono::seconds(1)) == std::future_status::ready;
    };
    g.b->empty_cache(synchronized);
    other.join();
    g.source()->on_deallocate = nullptr;
    EXPECT_TRUE(freed_during_trim) << "the free did not wait for the pool";
    EXPECT_EQ(g.held(0), static_cast<std::int64_t>(4 * MiB)) << "it waits for its stream";
    void* y = g.b->allocate(4 * MiB, 0, stream_a);
    g.b->deallocate(y);
    EXPECT_EQ(g.held(0), 0) << "after the trim, frees of the sole stream go straight again";
  }
}

TEST(bridge_sole_stream, a_gpu_is_asked_whether_it_is_discrete_on_its_first_allocation) {
  // Asking makes the GPU's memory source: a driver context on every visible GPU if the bridge
  // asked when it starts.
  two_gpus g;
  EXPECT_EQ(g.machine.sources_asked(), 0);
  g.b->deallocate(g.b->allocate(4 * MiB, 0, stream_a));
  EXPECT_EQ(g.machine.sources_asked(), 1) << "GPU 0 only";
  EXPECT_EQ(g.held(0), 0) << "and it is a discrete GPU's sole stream";
}

TEST(bridge_sole_stream, a_block_used_on_another_stream_still_waits_for_its_events) {
  two_gpus g;
  void* x = g.b->allocate(4 * MiB, 0, stream_a);
  g.b->record_stream(x, stream_b);
  g.b->deallocate(x);
  EXPECT_EQ(g.held(0), static_cast<std::int64_t>(4 * MiB));
  EXPECT_EQ(g.log.records[stream_b], 1);
  void* y = g.b->allocate(4 * MiB, 0, stream_a);
  EXPECT_NE(y, x) << "B's work may still use it";
  g.b->deallocate(y);
}

TEST(bridge_sole_stream, unified_gpus_and_max_cached_keep_every_free_waiting) {
  two_gpus unified;
  void* x = unified.b->allocate(4 * MiB, 1, stream_a);
  unified.b->deallocate(x);
  EXPECT_EQ(unified.held(1), static_cast<std::int64_t>(4 * MiB))
      << "a unified GPU's node pools also serve CPU memory: the block waits for its stream";
  two_gpus capped("max_cached:64MiB");
  void* y = capped.b->allocate(4 * MiB, 0, stream_a);
  capped.b->deallocate(y);
  EXPECT_EQ(capped.held(0), static_cast<std::int64_t>(4 * MiB))
      << "a pool that gives memory back by itself must not get blocks still in use";
}

}  // namespace
