// Faults where the pool gives pages back: madvise(MADV_DONTNEED) of the host NUMA source
// (host_numa_source::decommit), reached through max_cached (the pool gives back free pages
// before it commits more) and trim(), also inside the growable segment, which shrinks that way
// (Note [Decommitted pages] in caching_pool.hpp). The trace workloads of
// host_numa_source_os_fault_test.cpp never reach it, so this seeded workload does.
//
// The contract (caching_pool.cpp, decommit_free_pages): a give-back that fails changes nothing;
// the pages stay resident and stay counted as reserved, and the caller never sees an error (it
// is an optimisation, as PyTorch's release of cached blocks only ever frees what it can). So
// with segments populated and every page of every block written, the reserved bytes equal the
// resident pages of umem's mappings (mincore) after every run, whichever call failed.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "os_call_faults.hpp"
#include "os_fault_replay.hpp"

namespace umem::test {
namespace {

constexpr std::size_t mib = std::size_t{1} << 20;
const std::string dontneed = "madvise(MADV_DONTNEED)";

// 2-8 MiB blocks (multiples of the 2 MiB granule, so what a block takes back it touches) and
// small ones, at most 8 live, a trim() every 40 steps; max_cached 4 MiB makes the pool give
// pages back before it commits more. No thread cache: blocks freed go back to the pool at once,
// so their pages can be given back (a thread-cached block cannot).
workload decommit_workload() {
  std::mt19937_64 rng(20261201);
  workload w{"decommit_populated", "populate:map_populate,max_cached:4MiB,thread_cache:0", {},
             true, {4096, 4 * mib, 10 * mib}};
  std::vector<std::size_t> live;
  std::size_t next = 0;
  for (int i = 0; i < 160; ++i) {
    if (i % 40 == 39) {
      w.steps.push_back({step::op::trim, 0, 0});
    } else if (!live.empty() && (live.size() >= 8 || rng() % 100 < 45)) {
      const std::size_t k = rng() % live.size();
      w.steps.push_back({step::op::free, live[k], 0});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const std::size_t bytes = rng() % 100 < 70 ? (2 + 2 * (rng() % 4)) * mib
                                                 : 512 + rng() % (256 * 1024);
      w.steps.push_back({step::op::alloc, next, bytes});
      live.push_back(next++);
    }
  }
  return w;  // what is still live the replay frees after serving
}

// Which calls fail: every OS call, or only the give-backs; once or from N on.
class decommit_os_faults : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(decommit_os_faults, a_failed_give_back_stays_accounted) {
  const auto& [only_dontneed, persistent] = GetParam();
  const workload w = decommit_workload();
  const sweep_result r = sweep(w, persistent, only_dontneed ? dontneed : std::string());
  for (const auto& [kind, n] : r.clean_calls_by_kind)
    if (kind == dontneed || kind == "mmap" || kind == "munmap" || kind == "mbind" ||
        kind == "madvise(MADV_HUGEPAGE)" || kind == "madvise(MADV_POPULATE_WRITE)") {
      EXPECT_GT(n, 0u) << w.name << " reaches " << kind;
    }
  if (only_dontneed) {
    // Nothing the caller asked for needs a give-back to succeed (no limit here).
    EXPECT_EQ(r.errors, 0) << "a failed MADV_DONTNEED surfaced as an error";
    if (!persistent) {
      EXPECT_EQ(r.injected, r.calls) << "each run failed its one give-back";
    }
  }
}

std::string name_of(const ::testing::TestParamInfo<std::tuple<bool, bool>>& p) {
  return std::string(std::get<0>(p.param) ? "dontneed_only" : "every_call") +
         (std::get<1>(p.param) ? "_persistent" : "_once");
}

INSTANTIATE_TEST_SUITE_P(seeded_workload, decommit_os_faults,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), name_of);

}  // namespace
}  // namespace umem::test
