// The reclaim ladder (Note [Reclaim ladder] in reclaim_ladder.hpp): its order, one attempt per
// rung that gave memory back, and one out_of_memory per failed request, in climb() alone, over a
// caching pool, and through the allocator with an owner's hooks, counted on fake upstreams.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "allocator/fake_upstream.hpp"
#include "allocator/four_node_fixture.hpp"
#include "allocator/pool_test_support.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/detail/pool/caching_pool.hpp"
#include "umem/allocator/detail/pool/reclaim_ladder.hpp"

namespace umem::alloc {
namespace {

using namespace test;

// Rungs that log each call; the attempt succeeds once `succeed_after` rungs have given memory.
struct logged_rungs {
  std::vector<std::string> log;
  std::size_t thread_bytes = 0, stream_bytes = 0, trim_bytes = 0;
  int succeed_after = 99;
  bool spill_succeeds = false;
  int given = 0;
  int memory = 0;

  reclaim_rungs make() {
    reclaim_rungs r;
    r.attempt = [this]() -> attempt_result {
      log.push_back("attempt");
      if (given >= succeed_after) return {&memory, {}};
      return {nullptr, "no memory"};
    };
    auto rung = [this](const char* name, const std::size_t& bytes) {
      return [this, name, &bytes] {
        log.push_back(name);
        if (bytes != 0) ++given;
        return bytes;
      };
    };
    r.thread_caches = rung("thread_caches", thread_bytes);
    r.stream_blocks = rung("stream_blocks", stream_bytes);
    r.trim = rung("trim", trim_bytes);
    r.spill = [this]() -> attempt_result {
      log.push_back("spill");
      if (spill_succeeds) return {&memory, {}};
      return {nullptr, "spilling failed too"};
    };
    r.retried = [this] { log.push_back("retried"); };
    return r;
  }
};

TEST(reclaim_ladder, climbs_in_order_retrying_only_after_a_rung_that_gave_memory_back) {
  logged_rungs l;
  l.stream_bytes = 10;
  l.trim_bytes = 5;
  l.succeed_after = 2;  // the retry after trim succeeds
  reclaim_report report;
  const attempt_result a = climb(l.make(), report);
  EXPECT_EQ(a.p, &l.memory);
  EXPECT_EQ(l.log, (std::vector<std::string>{"attempt", "thread_caches", "stream_blocks",
                                             "retried", "attempt", "trim", "retried",
                                             "attempt"}));
  EXPECT_EQ(report.retries, 2);
  EXPECT_EQ(report.served_by, rung::trim);
  EXPECT_EQ(report.released, 15u);
}

TEST(reclaim_ladder, spills_last_and_says_what_it_tried) {
  logged_rungs l;
  l.thread_bytes = 7;
  reclaim_report report;
  const attempt_result a = climb(l.make(), report);
  EXPECT_EQ(a.p, nullptr);
  EXPECT_EQ(l.log, (std::vector<std::string>{"attempt", "thread_caches", "retried", "attempt",
                                             "stream_blocks", "trim", "spill"}));
  EXPECT_EQ(a.why, "no memory; even after giving back thread caches (7 bytes) and retrying; "
                   "spilling failed too");
  l.log.clear();
  l.spill_succeeds = true;
  reclaim_report spilled;
  EXPECT_EQ(climb(l.make(), spilled).p, &l.memory);
  EXPECT_EQ(spilled.served_by, rung::spill);
}

TEST(reclaim_ladder, climb_after_starts_at_the_rungs_and_keeps_the_first_reason) {
  logged_rungs l;
  l.trim_bytes = 3;
  reclaim_report report;
  const attempt_result a = climb_after({nullptr, "the first try failed"}, l.make(), report);
  EXPECT_EQ(a.p, nullptr);
  EXPECT_EQ(l.log, (std::vector<std::string>{"thread_caches", "stream_blocks", "trim", "retried",
                                             "attempt", "spill"}));
  EXPECT_EQ(a.why, "no memory; even after giving back trim (3 bytes) and retrying; "
                   "spilling failed too");
  l.log.clear();
  l.trim_bytes = 0;
  const attempt_result b = climb_after({nullptr, "the first try failed"}, l.make(), report);
  EXPECT_EQ(b.why, "the first try failed; nothing could be given back to retry; "
                   "spilling failed too");
  EXPECT_EQ(report.retries, 1);
}

TEST(reclaim_ladder, a_first_try_that_succeeds_climbs_nothing) {
  logged_rungs l;
  l.succeed_after = 0;
  reclaim_report report;
  EXPECT_EQ(climb(l.make(), report).p, &l.memory);
  EXPECT_EQ(l.log, std::vector<std::string>{"attempt"});
  EXPECT_EQ(report.retries, 0);
  EXPECT_EQ(report.served_by, rung::first_try);
}

// Thread-cached blocks keep the small segment busy: the failed growth is retried after the
// thread caches and after trim, one upstream call each, and then thrown once.
TEST(reclaim_ladder, a_pool_asks_the_upstream_once_per_rung_and_throws_once) {
  fake_upstream up(8 * MiB);
  up.set_growable(64 * MiB);
  pool_config cfg;
  cfg.thread_cache_bytes = 1 * MiB;
  caching_pool pool(up, node0, coherence::fine, cfg);
  void* big = pool.allocate(6 * MiB);            // the growable segment, 6 MiB
  pool.deallocate(pool.allocate(8 * KiB));       // a 2 MiB small segment, its block thread-cached
  ASSERT_EQ(up.outstanding_bytes(), 8 * MiB);
  const std::size_t grows = up.grow_calls();
  const std::size_t allocs = up.allocate_calls() + up.allocate_growable_calls();
  int thrown = 0;
  try {
    (void)pool.allocate(4 * MiB);  // 6 + 4 > 8 even once the small segment is gone
  } catch (const umem::error& e) {
    ++thrown;
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    for (const char* part :
         {"allocating 4194304 bytes", "node 0 (bind), fine",
          "the upstream has no memory to grow the expandable segment",
          "even after giving back thread caches (8192 bytes), trim (2097152 bytes)",
          "pool stats: allocated 6291456 bytes"})
      EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
  }
  EXPECT_EQ(thrown, 1);
  EXPECT_EQ(up.grow_calls() - grows, 3u) << "first try, after thread caches, after trim";
  EXPECT_EQ(up.allocate_calls() + up.allocate_growable_calls(), allocs)
      << "a growth that ran out is the attempt's one upstream call";
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_alloc_retries], 2);
  EXPECT_EQ(s[counter::num_ooms], 1);
  pool.deallocate(big);
}

TEST(reclaim_ladder, try_allocate_answers_null_and_counts_nothing) {
  fake_upstream up(2 * MiB);
  caching_pool pool(up, node0, coherence::fine);
  void* held = pool.allocate(2 * MiB);
  const attempt_result a = pool.try_allocate(2 * MiB);
  EXPECT_EQ(a.p, nullptr);
  EXPECT_NE(a.why.find("fake_upstream"), std::string::npos) << a.why;
  EXPECT_EQ(up.failed_calls(), 1u);
  const pool_stats s = pool.stats();
  EXPECT_EQ(s[counter::num_ooms], 0);
  EXPECT_EQ(s[counter::num_alloc_retries], 0);
  pool.deallocate(held);
}

// The allocator's ladder: thread caches, the owner's stream blocks, trim, spill, one error. The
// owner's hook frees a block it held (as the torch bridge's does once its streams finished).
struct owner_fixture {
  four_node_allocator f{"policy:node:1,spill:allow", 8 * MiB};
  void* held = nullptr;
  int hook_calls = 0, trim_calls = 0;
  std::size_t failed_at_hook = 0, frees_at_hook = 0;
  bool may = true;

  owner_fixture() {
    f.a->set_reclaim_hooks({[this]() -> std::size_t {
                              ++hook_calls;
                              failed_at_hook = f.upstream->failed_calls();
                              frees_at_hook = f.upstream->deallocate_calls();
                              if (!held) return 0;
                              f.a->deallocate(held);
                              held = nullptr;
                              return 2 * MiB;
                            },
                            [this] { return may; },
                            [this] {  // the owner's trim, around the allocator's
                              ++trim_calls;
                              return f.a->trim();
                            }});
  }
};

TEST(reclaim_ladder, the_allocator_climbs_every_rung_once_in_order_then_throws_once) {
  owner_fixture o;
  void* keep = o.f.a->allocate(4 * MiB);  // node 1's growable segment
  o.held = o.f.a->allocate(2 * MiB);      // grows it to 6 MiB
  o.f.a->deallocate(o.f.a->allocate(8 * KiB));  // a small segment: 8 MiB outstanding
  const std::size_t failed = o.f.upstream->failed_calls();
  reclaim_report report;
  request r;
  r.report = &report;
  int thrown = 0;
  try {
    (void)o.f.a->allocate(8 * MiB, r);
  } catch (const umem::error& e) {
    ++thrown;
    EXPECT_EQ(e.code(), errc::out_of_memory);
    const std::string m = e.what();
    EXPECT_NE(m.find("node 1 (bind), fine: out of memory allocating 8388608 bytes"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("spilling to nodes 0,2-3 failed too"), std::string::npos) << m;
    EXPECT_NE(m.find("pool stats:"), std::string::npos) << m;
  }
  EXPECT_EQ(thrown, 1);
  EXPECT_EQ(o.hook_calls, 1);
  EXPECT_EQ(o.trim_calls, 1) << "the trim rung is the owner's";
  EXPECT_EQ(o.failed_at_hook - failed, 2u) << "first try and the thread caches' retry came first";
  EXPECT_EQ(o.frees_at_hook, 0u) << "trim comes after the owner's rung";
  EXPECT_GE(o.f.upstream->deallocate_calls(), 1u) << "trim gave the small segment back";
  // 1 + 3 retries on node 1, then one call per spill node.
  EXPECT_EQ(o.f.upstream->failed_calls() - failed, 4u + 3u);
  EXPECT_EQ(report.retries, 3);
  EXPECT_EQ(o.f.upstream->last_binding(), (node_binding{bind_mode::bind, {3}}));
  const auto stats = o.f.a->memory_stats();
  EXPECT_EQ(stats.at("num_ooms.node1_fine"), 1);
  EXPECT_EQ(stats.at("num_ooms"), 1);
  EXPECT_EQ(stats.at("num_alloc_retries.node1_fine"), 3);
  EXPECT_EQ(stats.at("spills"), 0);
  o.f.a->deallocate(keep);
}

TEST(reclaim_ladder, the_owners_rung_serves_a_request_before_trim) {
  owner_fixture o;
  void* keep = o.f.a->allocate(6 * MiB);
  o.held = o.f.a->allocate(2 * MiB);  // 8 MiB outstanding
  reclaim_report report;
  request r;
  r.report = &report;
  void* p = o.f.a->allocate(2 * MiB, r);  // the held block's place
  EXPECT_EQ(report.served_by, rung::stream_blocks);
  EXPECT_EQ(o.f.upstream->deallocate_calls(), 0u) << "nothing trimmed";
  o.f.a->deallocate(p);
  o.f.a->deallocate(keep);
}

TEST(reclaim_ladder, while_the_owner_forbids_it_no_stream_blocks_and_no_trim) {
  owner_fixture o;
  o.may = false;
  void* keep = o.f.a->allocate(6 * MiB);
  o.f.a->deallocate(o.f.a->allocate(2 * MiB));  // a free segment trim would give back
  EXPECT_THROW((void)o.f.a->allocate(4 * MiB), umem::error);
  EXPECT_EQ(o.hook_calls, 0);
  EXPECT_EQ(o.trim_calls, 0);
  EXPECT_EQ(o.f.upstream->deallocate_calls(), 0u) << "no trim";
  o.f.a->deallocate(keep);
}

}  // namespace
}  // namespace umem::alloc
