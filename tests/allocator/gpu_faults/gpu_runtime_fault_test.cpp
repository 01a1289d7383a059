// Faults in the GPU runtime: the Nth call of the runtime that makes memory GPU-visible or gives
// device memory fails with the runtime's out-of-memory status, for every N over a replay of the
// real GPT-2 training trace, once and from N on (memory that stays exhausted). The runtimes are
// the test doubles (tests/cuda_double, tests/rocr_double) with their counted fault switch
// (tests/cuda_double/counted_faults.hpp), under the allocator built the way production builds
// it: a live_machine whose runtime select_gpu_runtime chose. Three machines:
//  - an H200 (CUDA, discrete): device memory from cuMemAlloc and, for the expandable large
//    segment, cuMemAddressReserve + cuMemCreate/cuMemMap/cuMemSetAccess; host memory
//    registered with cuMemHostRegister;
//  - the 4-socket MI300A (ROCr, APU, XNACK off): every placement is host memory locked with
//    hsa_amd_memory_lock_to_pool (device:D too, the APU's default coarse kind);
//  - a 4x MI300X node (ROCr, discrete): device memory from hsa_amd_memory_pool_allocate and the
//    hsa_amd_vmem_* calls, host memory locked.
// Each failure must surface as one umem::error(out_of_memory) naming the failed call, or be
// recovered; the statistics equal a recount of the segments and blocks and what the double holds
// live; the allocator keeps serving once the calls succeed again; once everything is freed and
// the allocator destroyed the double holds nothing (no registration, allocation, reservation,
// handle, mapping, lock). The OS-call twin of this test is os_faults/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocator/rocr_double_machine.hpp"
#include "cuda_runtime/cuda_test_env.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "runtime_double_faults.hpp"
#include "trace_file.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::alloc {
namespace {

using test::gpu_faults::live_count;
using test::gpu_faults::runtime_double_faults;
using machine::gpu_runtime_request;
using machine::live_machine;
using machine::select_gpu_runtime;

constexpr std::size_t MiB = std::size_t{1} << 20;
// The replay: this many events of the trace, its sizes divided by kSizeDivisor (a growth maps
// one 2 MiB chunk per two calls, cuMemCreate + cuMemMap, so the trace's 148 MiB first block
// alone would be 150 calls to fail one by one), a trim() every kTrimEvery events (freed device
// chunks go back and are mapped again). No thread cache, so the statistics are exact.
constexpr std::size_t kEvents = 300;
constexpr std::uint64_t kSizeDivisor = 4;
constexpr std::size_t kTrimEvery = 100;
constexpr const char* kConf = "thread_cache:0";
constexpr const char* kMi300x = "rocminfo_contrast_mi300x_x4_epyc9474f_thamada.txt";

const trace_replay::trace& gpt2() {
  static const trace_replay::trace t = trace_replay::load_trace(
      std::filesystem::path(UMEM_TRACES_DIR) / "trace_gpt2_train.csv.gz");
  return t;
}

// One machine served by a double, built once per test and copied into every replay's allocator.
struct served_machine {
  std::string name;
  live_machine machine;
  std::unique_ptr<runtime_double_faults> faults;
  // Request of trace block `id`: device memory, or host memory for every fourth block.
  std::function<request(std::int64_t id)> placement;
  // The entry points the workload reaches (each is checked to be): a persistent failure may
  // surface through any of them.
  std::vector<std::string> entries;
  bool discrete = false;  // device:D is the GPU's own memory
  // The double's control that empties its call log (the log only).
  std::string clear_log;
  // What the double holds live now, and the bytes it holds for host and for device memory.
  std::function<std::vector<live_count>()> live;
  std::function<std::int64_t()> host_bytes;
  std::function<std::int64_t()> device_bytes;
};

request device_or_host(std::int64_t id, const char* device) {
  if (id % 4 == 3) return {};
  return {parse_placement(device), std::nullopt};
}

class gpu_runtime_faults : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto trace = std::filesystem::path(UMEM_TRACES_DIR) / "trace_gpt2_train.csv.gz";
    if (!std::filesystem::exists(trace))
      GTEST_SKIP() << "no " << trace << " (the shared reference data beside the checkout)";
  }

  served_machine h200() {
    served_machine s;
    s.name = "h200_cuda";
    cuda_served_.emplace(test::h200_machine());
    cuda_ = std::make_shared<const cuda::cuda_driver>(
        cuda::cuda_driver::load_from(test::cuda_double_candidates()));
    live_machine& m = s.machine;
    m.topo.hsa.state = runtime_state::no_library;
    m.topo.numa = numa::load_hwloc_live();
    m.runtime = select_gpu_runtime(m.topo, gpu_runtime_request::cuda, nullptr,
                                   test::cuda_double_candidates());
    EXPECT_EQ(m.runtime->kind(), machine::gpu_runtime_kind::cuda) << m.topo.gpu_backend.reason;
    test::bind_gpus_to_first_node(m.topo);
    s.faults = std::make_unique<runtime_double_faults>(UMEM_CUDA_DOUBLE_PATH, "umem_cuda_double_");
    const runtime_double_faults* f = s.faults.get();
    s.placement = [](std::int64_t id) { return device_or_host(id, "device:0"); };
    s.clear_log = "clear_log";
    s.discrete = true;
    s.entries = {"cuMemHostRegister", "cuMemAlloc",     "cuMemAddressReserve",
                 "cuMemCreate",       "cuMemMap",       "cuMemSetAccess"};
    const int retains = test::cuda_double_retains(0);
    s.live = [f, retains] {
      return std::vector<live_count>{
          f->count("registrations", "cuMemHostRegister registrations"),
          f->count("device_allocations", "cuMemAlloc allocations"),
          f->count("vmm_reservations", "cuMemAddressReserve reservations"),
          f->count("vmm_handles", "cuMemCreate handles"),
          f->count("vmm_mappings", "cuMemMap mappings"),
          {"primary context retains beyond the backend's", test::cuda_double_retains(0) - retains}};
    };
    s.host_bytes = [f] {
      return static_cast<std::int64_t>(
          f->control<unsigned long long (*)()>("registered_bytes")());
    };
    s.device_bytes = [] {
      return static_cast<std::int64_t>(test::cuda_double_device_bytes_in_use(0));
    };
    return s;
  }

  // The ROCr double (its 7.1 build, with the VMM exports) serving `served`, whose GPUs are
  // `discrete` or APUs.
  served_machine rocr(std::string name, const topology& served, const char* device,
                      bool discrete) {
    served_machine s;
    s.name = std::move(name);
    s.machine = rocr_.serve(served, UMEM_ROCR_DOUBLE_PATH, "7.1");
    // Held for the whole test, from here (discovery opened and closed its own session): the
    // double forgets everything at the last hsa_shut_down, which would hide a leak.
    session_.emplace(*rocr_.library());
    s.faults = std::make_unique<runtime_double_faults>(UMEM_ROCR_DOUBLE_PATH, "umem_rocr_double_");
    const runtime_double_faults* f = s.faults.get();
    s.placement = [device](std::int64_t id) { return device_or_host(id, device); };
    s.clear_log = "reset";  // umem_rocr_double_reset empties the log only
    s.entries = {"hsa_amd_memory_lock_to_pool"};
    s.discrete = discrete;
    if (discrete)
      s.entries.insert(s.entries.end(),
                       {"hsa_amd_memory_pool_allocate", "hsa_amd_vmem_address_reserve_align",
                        "hsa_amd_vmem_handle_create", "hsa_amd_vmem_map",
                        "hsa_amd_vmem_set_access"});
    s.live = [f] {
      return std::vector<live_count>{
          f->count("locks", "locks"),
          f->count("pool_allocations", "pool allocations"),
          f->count("vmem_reservations", "vmem reservations"),
          f->count("vmem_handles", "vmem handles"),
          f->count("vmem_mappings", "vmem mappings")};
    };
    s.host_bytes = [f] {
      return static_cast<std::int64_t>(f->control<std::uint64_t (*)()>("locked_bytes")());
    };
    // Every device pool's memory: pool allocations and vmem handles of any agent.
    std::vector<std::uint32_t> gpu_nodes;
    for (const agent* g : s.machine.topo.gpus()) gpu_nodes.push_back(g->kfd_node);
    s.device_bytes = [f, gpu_nodes] {
      auto bytes = static_cast<std::int64_t>(
          f->control<std::uint64_t (*)()>("pool_allocated_bytes")());
      for (std::uint32_t node : gpu_nodes)
        bytes += static_cast<std::int64_t>(
            f->control<std::uint64_t (*)(std::uint32_t)>("vmem_handle_bytes")(node));
      return bytes;
    };
    return s;
  }

  void run_every_fault(served_machine& s);

  std::optional<test::cuda_double_machine> cuda_served_;
  std::shared_ptr<const cuda::cuda_driver> cuda_;  // keeps the CUDA double and its state loaded
  test::rocr_double_machine rocr_;
  std::optional<hsa::rocr_session> session_;
};

bool names_one_of(const std::string& message, const std::vector<std::string>& entries) {
  for (const auto& e : entries)
    if (message.find(e) != std::string::npos) return true;
  return false;
}

// The statistics against a recount of the segments and blocks, and the reserved bytes of the
// host and the device pools against what the double holds for them.
void expect_accounted(const allocator& a, const served_machine& s, const std::string& where) {
  std::int64_t segments = 0, segment_bytes = 0, blocks = 0, block_bytes = 0;
  std::int64_t host_reserved = 0, device_reserved = 0;
  for (const pool_report& p : a.pool_reports(true)) {
    (p.device < 0 ? host_reserved : device_reserved) +=
        p.stats(metric::reserved_bytes, size_class::all).current;
    for (const segment_snapshot& seg : p.snapshot.segments) {
      ++segments;
      segment_bytes += static_cast<std::int64_t>(seg.size);
      for (const block_snapshot& b : seg.blocks)
        if (b.allocated) {
          ++blocks;
          block_bytes += static_cast<std::int64_t>(b.size);
        }
    }
  }
  const auto stats = a.memory_stats();
  EXPECT_EQ(stats.at("segment.all.current"), segments) << where;
  EXPECT_EQ(stats.at("allocation.all.current"), blocks) << where;
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), block_bytes) << where;
  // Device chunks given back by trim() stay inside their segments (Note [Giving device pages
  // back] in cuda_device_source.hpp): reserved bytes count only what is mapped.
  EXPECT_LE(stats.at("reserved_bytes.all.current"), segment_bytes) << where;
  EXPECT_EQ(stats.at("reserved_bytes.all.current"), host_reserved + device_reserved) << where;
  EXPECT_EQ(s.host_bytes(), host_reserved) << where << ": host memory the runtime maps for umem";
  EXPECT_EQ(s.device_bytes(), device_reserved) << where << ": device memory the runtime gave";
}

struct run_result {
  std::size_t calls = 0;
  std::size_t injected = 0;
  int errors = 0;
  std::string by_entry;  // the counted calls by entry point
};

run_result replay_with_failure(const served_machine& s, std::size_t fail_at, bool persistent) {
  const auto& events = gpt2().events;
  const std::string where = s.name + ", failing call " + std::to_string(fail_at) +
                            (persistent ? " and every later one" : "");
  run_result r;
  s.faults->control<void (*)()>(s.clear_log)();
  s.faults->arm(fail_at, persistent);
  {
    allocator a(parse_alloc_conf(kConf), s.machine);
    std::vector<void*> blocks;
    for (std::size_t i = 0; i < std::min(kEvents, events.size()); ++i) {
      const trace_replay::event& e = events[i];
      if (e.op == trace_replay::op_kind::alloc) {
        void* p = nullptr;
        try {
          p = a.allocate(std::max<std::uint64_t>(512, e.size / kSizeDivisor), s.placement(e.id));
        } catch (const umem::error& err) {
          ++r.errors;
          const std::string message = err.what();
          EXPECT_EQ(err.code(), errc::out_of_memory) << where << ": " << message;
          const std::string failed = s.faults->first_failed();
          EXPECT_FALSE(failed.empty()) << where << ": an error with no failed call: " << message;
          // From N on, a later call of another entry point may be the one that surfaces.
          if (persistent) {
            EXPECT_TRUE(names_one_of(message, s.entries)) << where << ": " << message;
          } else {
            EXPECT_NE(message.find(failed), std::string::npos)
                << where << ": the error names the failed " << failed << ": " << message;
          }
        } catch (const std::exception& other) {
          ADD_FAILURE() << where << ": not a umem::error: " << other.what();
        }
        blocks.push_back(p);
      } else if (e.op == trace_replay::op_kind::free) {
        EXPECT_NO_THROW(a.deallocate(blocks.at(static_cast<std::size_t>(e.id)))) << where;
        blocks[static_cast<std::size_t>(e.id)] = nullptr;
      }
      if ((i + 1) % kTrimEvery == 0) a.trim();
    }
    r.calls = s.faults->calls();
    r.injected = s.faults->injected();
    r.by_entry = s.faults->calls_by_entry();
    s.faults->arm(0, false);
    if (fail_at == 0) {  // the recount below compares something
      EXPECT_GT(s.host_bytes(), 0) << where << ": host memory the runtime maps";
      if (s.discrete) {
        EXPECT_GT(s.device_bytes(), 0) << where << ": device memory the runtime gave";
      }
    }
    expect_accounted(a, s, where);
    // It keeps serving: small, large and huge blocks of host and device memory, written to.
    for (const request& q : {s.placement(3), s.placement(0)})
      for (std::size_t bytes : {std::size_t{4096}, 3 * MiB, 70 * MiB}) {
        void* p = nullptr;
        EXPECT_NO_THROW(p = a.allocate(bytes, q)) << where << ": " << bytes << " bytes after it";
        if (p == nullptr) continue;
        std::memset(p, 0x5a, 4096);
        a.deallocate(p);
      }
    for (void* p : blocks) a.deallocate(p);
    a.trim();
    expect_accounted(a, s, where + ", all freed");
  }
  for (const live_count& c : s.live())
    EXPECT_EQ(c.n, 0) << where << ": " << c.what << " left after the allocator is gone";
  if (!persistent) {
    EXPECT_LE(r.errors, 1) << where << ": one failure, at most one error";
  }
  return r;
}

void gpu_runtime_faults::run_every_fault(served_machine& s) {
  const run_result clean = replay_with_failure(s, 0, false);
  ASSERT_EQ(clean.errors, 0) << s.name << ": the workload runs without failures";
  std::cout << "[gpu faults] " << s.name << ": " << clean.calls
            << " fault-able calls: " << clean.by_entry << '\n';
  for (const std::string& e : s.entries)
    EXPECT_NE(clean.by_entry.find(e + "="), std::string::npos) << s.name << " reaches " << e;
  for (const bool persistent : {false, true}) {
    std::size_t injected = 0, errors = 0, recovered = 0;
    for (std::size_t n = 1; n <= clean.calls; ++n) {
      const run_result r = replay_with_failure(s, n, persistent);
      EXPECT_GE(r.injected, 1u) << s.name << ": call " << n << " was reached";
      injected += r.injected;
      errors += static_cast<std::size_t>(r.errors);
      if (r.injected > 0 && r.errors == 0) ++recovered;
      if (::testing::Test::HasFailure()) return;  // one failing N tells the story
    }
    std::cout << "[gpu faults] " << s.name << (persistent ? " (from N on)" : " (once)")
              << ": N = 1.." << clean.calls << ", " << injected << " failures injected, " << errors
              << " errors (out_of_memory naming the call), " << recovered
              << " runs recovered without an error\n";
  }
}

TEST_F(gpu_runtime_faults, h200_every_cuda_call_may_fail_and_nothing_leaks) {
  served_machine s = h200();
  run_every_fault(s);
}

TEST_F(gpu_runtime_faults, mi300a_every_rocr_call_may_fail_and_nothing_leaks) {
  UMEM_REQUIRE_FIXTURE(rocminfo, test::kMi300aRocminfo);
  served_machine s = rocr("mi300a_rocr", test::import_capture(rocminfo), "device:0", false);
  run_every_fault(s);
}

// The MI300X as ROCr >= 6.1 reports it: a discrete GPU (no APU bit).
TEST_F(gpu_runtime_faults, mi300x_every_rocr_call_may_fail_and_nothing_leaks) {
  UMEM_REQUIRE_FIXTURE(rocminfo, kMi300x);
  topology t = test::import_capture(rocminfo);
  for (auto& a : t.agents)
    if (a.kind == agent_kind::gpu) a.is_apu = false;
  served_machine s = rocr("mi300x_rocr", t, "device:1", true);
  run_every_fault(s);
}

}  // namespace
}  // namespace umem::alloc
