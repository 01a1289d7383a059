// Faults below the source: the Nth OS call (mmap, munmap, mbind, madvise) of the real host NUMA
// source (host_numa_source.cpp over os_memory.cpp) fails with the kernel's ENOMEM, for every N
// over a replay of a real PyTorch trace through the assembled allocator, once and from N on
// (memory that stays exhausted). Each failure must surface as one umem::error(out_of_memory)
// naming the call, or be recovered; while the allocator lives its reserved bytes equal a recount
// of its segments and the kernel's read-write mappings in the address space it took
// (/proc/self/maps); it keeps serving once the calls succeed again; after it is destroyed the
// process's anonymous mappings are back to what they were (os_fault_replay.hpp). The OS calls are
// interposed at link time (os_call_faults.hpp), so production code carries no hook.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "os_call_faults.hpp"
#include "os_fault_replay.hpp"
#include "trace_file.hpp"

namespace umem::test {
namespace {

// One workload: a prefix of the GPT-2 training trace, its sizes divided by `size_divisor`, on an
// allocator configured by `conf`.
struct trace_workload {
  const char* name;
  std::size_t events;
  std::uint64_t size_divisor;
  const char* conf;
};

// Real sizes cost only address space (the blocks are never touched).
// Populating writes every page, so that run takes the first 400 events at 1/256 of their sizes.
// No max_cached: pages given back (MADV_DONTNEED) leave the segments' sizes but not the reserved
// bytes, and untouched blocks give no measure of them; decommit_os_fault_test.cpp has a workload
// for that.
const trace_workload trace_workloads[] = {
    {"gpt2_800_events", 800, 1, ""},
    {"gpt2_400_events_populated", 400, 256, "populate:map_populate"},
};

const trace_replay::trace* gpt2_trace() {
  static const std::optional<trace_replay::trace> t =
      []() -> std::optional<trace_replay::trace> {
    const std::filesystem::path path =
        std::filesystem::path(UMEM_TRACES_DIR) / "trace_gpt2_train.csv.gz";
    if (!std::filesystem::exists(path)) return std::nullopt;
    return trace_replay::load_trace(path);
  }();
  return t ? &*t : nullptr;
}

workload steps_of(const trace_workload& t) {
  workload w{t.name, t.conf, {}, false,
             {std::size_t{4096}, std::size_t{3} << 20, std::size_t{70} << 20}};
  const auto& events = gpt2_trace()->events;
  std::size_t next_id = 0;
  for (std::size_t i = 0; i < std::min(t.events, events.size()); ++i) {
    const trace_replay::event& e = events[i];
    if (e.op == trace_replay::op_kind::alloc)
      w.steps.push_back({step::op::alloc, next_id++,
                         std::max<std::size_t>(512, e.size / t.size_divisor)});
    else if (e.op == trace_replay::op_kind::free)
      w.steps.push_back({step::op::free, static_cast<std::size_t>(e.id), 0});
  }
  return w;
}

class os_fault_injection
    : public ::testing::TestWithParam<std::tuple<trace_workload, bool>> {
 protected:
  void SetUp() override {
    if (!gpt2_trace())
      GTEST_SKIP() << "no trace_gpt2_train.csv.gz in " << UMEM_TRACES_DIR
                   << " (the shared reference data beside the checkout)";
  }
};

TEST_P(os_fault_injection, every_os_call_may_fail_and_nothing_leaks) {
  const auto& [t, persistent] = GetParam();
  const workload w = steps_of(t);
  const sweep_result r = sweep(w, persistent);
  for (const auto& [kind, n] : r.clean_calls_by_kind)
    if (kind == "mmap" || kind == "munmap" || kind == "mbind" ||
        kind == "madvise(MADV_HUGEPAGE)" ||
        (kind == "madvise(MADV_POPULATE_WRITE)" && t.size_divisor != 1)) {
      EXPECT_GT(n, 0u) << w.name << " reaches " << kind;
    }
}

std::string name_of(const ::testing::TestParamInfo<std::tuple<trace_workload, bool>>& p) {
  return std::string(std::get<0>(p.param).name) + (std::get<1>(p.param) ? "_persistent" : "_once");
}

INSTANTIATE_TEST_SUITE_P(gpt2_trace, os_fault_injection,
                         ::testing::Combine(::testing::ValuesIn(trace_workloads),
                                            ::testing::Bool()),
                         name_of);

}  // namespace
}  // namespace umem::test
