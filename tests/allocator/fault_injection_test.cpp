// Faults at every step: a source that fails its Nth call (allocate, allocate_growable, grow,
// decommit, recommit) with out_of_memory, for every N over a fixed workload of a caching pool
// (small and large blocks, growth in place, frees making holes, max_cached_bytes giving pages
// back, trims). Each failure must surface as one umem::error(out_of_memory) or be recovered;
// afterwards every live block is still intact, the pool keeps serving, and once everything is
// freed and trimmed no segment is left at the upstream and the statistics are zero.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "fake_upstream.hpp"
#include "pool_test_support.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

using test::fake_upstream;
using test::KiB;
using test::MiB;
using test::node0;

// Forwards to `up`, failing its `fail_at`th counted call (1-based; 0: never).
class failing_source final : public upstream_source {
 public:
  failing_source(upstream_source& up, std::size_t fail_at) : up_(up), fail_at_(fail_at) {}

  segment allocate(std::size_t bytes, const node_binding& w, coherence k) override {
    step("allocate");
    return up_.allocate(bytes, w, k);
  }
  segment allocate_growable(std::size_t bytes, std::size_t reserve, const node_binding& w,
                            coherence k) override {
    step("allocate_growable");
    return up_.allocate_growable(bytes, reserve, w, k);
  }
  bool grow(segment& s, std::size_t extra) override {
    step("grow");
    return up_.grow(s, extra);
  }
  bool decommit(const segment& s, void* p, std::size_t bytes) override {
    step("decommit");
    return up_.decommit(s, p, bytes);
  }
  void recommit(const segment& s, void* p, std::size_t bytes) override {
    step("recommit");
    up_.recommit(s, p, bytes);
  }
  void deallocate(const segment& s) noexcept override { up_.deallocate(s); }
  std::string describe() const override { return "failing source"; }

  std::size_t calls() const { return calls_; }
  bool failed() const { return failed_; }

 private:
  void step(const char* what) {
    if (++calls_ != fail_at_) return;
    failed_ = true;
    throw error(errc::out_of_memory, std::string("injected failure of ") + what);
  }

  upstream_source& up_;
  std::size_t fail_at_;
  std::size_t calls_ = 0;
  bool failed_ = false;
};

struct live {
  void* p;
  std::size_t bytes;
  unsigned char fill;
};

// The workload; `errors` counts the out_of_memory errors it saw (any other error fails the test).
void workload(caching_pool& pool, std::vector<live>& blocks, int& errors) {
  const std::size_t sizes[] = {512, 40 * KiB, 3 * MiB, 8 * MiB + 100, 1 * MiB, 24 * MiB, 2 * MiB};
  unsigned char fill = 1;
  auto take = [&](std::size_t bytes) {
    try {
      void* p = pool.allocate(bytes);
      std::memset(p, fill, bytes);
      blocks.push_back({p, bytes, fill++});
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), errc::out_of_memory) << e.what();
      ++errors;
    }
  };
  for (int round = 0; round < 3; ++round) {
    for (std::size_t s : sizes) take(s);
    // Free every other block: holes in the middle of grown segments.
    for (std::size_t i = 0; i < blocks.size(); i += 2) pool.deallocate(blocks[i].p);
    std::vector<live> kept;
    for (std::size_t i = 1; i < blocks.size(); i += 2) kept.push_back(blocks[i]);
    blocks.swap(kept);
    take(16 * MiB);  // fits no hole: gives pages back first (max_cached_bytes), then grows
    take(6 * MiB);   // a hole again: its given-back pages are taken back
    if (round == 1) (void)pool.trim();
  }
}

bool intact(const live& b) {
  const auto* c = static_cast<const unsigned char*>(b.p);
  return c[0] == b.fill && c[b.bytes / 2] == b.fill && c[b.bytes - 1] == b.fill;
}

void run_with_failure_at(std::size_t n, bool thread_cache, std::size_t& calls, bool& failed) {
  fake_upstream up{0, 2 * MiB, 2 * MiB};
  up.set_growable(64 * MiB);
  up.set_decommit(true);
  failing_source src(up, n);
  pool_config cfg;
  cfg.max_cached_bytes = 4 * MiB;
  cfg.expandable_reserve_bytes = 64 * MiB;
  cfg.thread_cache_bytes = thread_cache ? 8 * MiB : 0;
  {
    caching_pool pool(src, node0, coherence::fine, cfg);
    std::vector<live> blocks;
    int errors = 0;
    workload(pool, blocks, errors);
    for (const live& b : blocks) EXPECT_TRUE(intact(b)) << "failure at call " << n;
    void* after = nullptr;
    EXPECT_NO_THROW(after = pool.allocate(5 * MiB)) << "the pool keeps serving, call " << n;
    if (after) pool.deallocate(after);
    for (const live& b : blocks) pool.deallocate(b.p);
    (void)pool.trim();
    const pool_stats st = pool.stats();
    EXPECT_EQ(st(metric::allocated_bytes, size_class::all).current, 0) << "call " << n;
    EXPECT_EQ(st(metric::reserved_bytes, size_class::all).current, 0) << "call " << n;
    EXPECT_EQ(st(metric::segment, size_class::all).current, 0) << "call " << n;
    EXPECT_EQ(up.outstanding_segments(), 0u) << "no segment leaked, failure at call " << n;
    if (n != 0) {
      EXPECT_LE(errors, 1) << "one failure, at most one error: call " << n;
    }
    calls = src.calls();
    failed = src.failed();
  }
  if (n == 0) {  // the clean run reaches every kind of call that can fail
    EXPECT_GT(up.grown_calls(), 0u);
    EXPECT_GT(up.decommit_calls(), 0u);
    EXPECT_GT(up.recommit_calls(), 0u);
    EXPECT_GT(up.allocate_growable_calls(), 1u);
  }
  EXPECT_EQ(up.bad_deallocates(), 0u) << "call " << n;
  EXPECT_EQ(up.bad_grows(), 0u) << "call " << n;
  EXPECT_EQ(up.bad_decommits(), 0u) << "call " << n;
}

class FaultInjection : public ::testing::TestWithParam<bool> {};

TEST_P(FaultInjection, EveryUpstreamCallMayFailOnceAndNothingLeaks) {
  std::size_t total = 0;
  bool failed = false;
  run_with_failure_at(0, GetParam(), total, failed);
  ASSERT_GT(total, 20u) << "the workload reaches the upstream often enough to be worth it";
  for (std::size_t n = 1; n <= total; ++n) {
    std::size_t calls = 0;
    run_with_failure_at(n, GetParam(), calls, failed);
    EXPECT_TRUE(failed) << "call " << n << " of " << total << " was reached";
    if (::testing::Test::HasFailure()) break;  // one failing N tells the story
  }
}

std::string cache_name(const ::testing::TestParamInfo<bool>& p) { return p.param ? "on" : "off"; }

INSTANTIATE_TEST_SUITE_P(ThreadCaches, FaultInjection, ::testing::Values(false, true), cache_name);

}  // namespace
}  // namespace umem::alloc
