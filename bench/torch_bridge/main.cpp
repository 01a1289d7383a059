// umem-torch-bridge-bench: one allocation through the torch bridge's C ABI, timed alone.
// Replays the alloc/free events of real PyTorch traces (shared/reference/traces, read by
// bench/trace_replay/trace_file.hpp) through umem_torch_extension_alloc /
// umem_torch_extension_release, the calls umem's PyTorch extension makes
// (torch_bridge/extension/umem_cuda_allocator.cpp), each timed alone with steady_clock, `--passes`
// passes without emptying the cache, the last one reported: per call kind median, p90, p99,
// p99.9, max and the count above --slow-ns; then, for the slow calls, what the bridge did in them (Note [Call trace] in bridge.hpp) and whether the device's
// reservation grew.
//
// Where it runs: with --cuda-double, on any machine against the CUDA test double
// (tests/cuda_double) serving the tests' H200 (tests/cuda_runtime/h200_machine.hpp) or the machine
// of --snapshot; without it, unchanged, against the machine's
// libcuda.so.1 (UMEM_CUDA_DRIVER_LIB and UMEM_GPU_BACKEND as usual). Every trace stream is
// replayed on the default (null) stream: the real traces have one stream, and the double knows no
// other.
//
// Note [Where the double's GPU sits]
// umem maps a discrete GPU to the NUMA node of its PCI device (numa/src/gpu_numa_mapping.cpp), and
// the bridge asks for that node (statistics, capacity). The H200's PCI address is not a device of
// this machine, so the snapshot the double serves is a copy whose GPU sits at the first PCI device
// here that has local_cpus (any will do: the double serves memory, not a device).
//
// Note [Cold calls]
// In training, PyTorch's kernel launches and the Python interpreter run between two allocator
// calls and evict what the allocator touched from the CPU caches; timed back to back, the calls
// find their tables warm. --touch-between N writes one byte per cache line of an N-byte buffer
// before every call (untimed), so that the calls run as cold as in training and what each
// table costs shows.
//
// Note [Attributing growth]
// Whether a call made the device's reservation grow is read from umem_torch_get_device_stats after
// each slow call only (reading it after every call would disturb what is timed): the growth since
// the previous reading is the slow call's. Growth in fast calls is then charged to the next slow
// one; the report says how much growth the pass had in all, so the two can be compared.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cuda_runtime/h200_machine.hpp"
#include "trace_file.hpp"
#include "umem/core/error.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/torch_bridge/bridge.hpp"
#include "umem/umem_torch.h"

namespace {

namespace tr = umem::trace_replay;
using clock_type = std::chrono::steady_clock;

// What the slow calls of one kind did (Note [Call trace]); `all` counts every call.
struct why {
  std::size_t calls = 0;
  std::size_t stream_cache = 0;
  std::size_t allocator = 0;
  std::size_t release_scan = 0;
  std::size_t released_blocks = 0;  // calls that returned blocks to the allocator
  std::size_t blocks = 0;           // the blocks they returned
  std::size_t live_rehash = 0;
  std::size_t two_locks = 0;  // calls that took the bridge's mutex more than once
  std::size_t grew = 0;       // Note [Attributing growth]

  void add(const umem::torch_bridge::call_trace& t) {
    ++calls;
    stream_cache += t.stream_cache;
    allocator += t.allocator;
    release_scan += t.release_scan;
    released_blocks += t.released > 0;
    blocks += t.released;
    live_rehash += t.live_rehash;
    two_locks += t.locks > 1;
  }
};

struct kind_result {
  std::vector<std::uint32_t> ns;
  why slow, all;
};

struct pass_result {
  kind_result alloc, free;
  std::int64_t growth_bytes = 0;      // the device's reserved bytes, end of pass less start
  std::int64_t device_allocs = 0;     // num_device_alloc during the pass
  std::int64_t growth_charged = 0;    // bytes charged to slow calls (Note [Attributing growth])
};

umem_torch_device_stats device_stats(int device) {
  umem_torch_device_stats s{};
  if (umem_torch_get_device_stats(device, &s) != UMEM_OK)
    umem::throw_error(umem::errc::runtime_error,
                      std::string("umem_torch_get_device_stats: ") + umem_torch_last_error());
  return s;
}

std::uint32_t percentile(const std::vector<std::uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(sorted.size()) + 0.999999);
  return sorted[std::min(sorted.size(), std::max<std::size_t>(rank, 1)) - 1];
}

// One pass over `t`'s alloc/free events; what it leaves live is freed (untimed) at the end.
pass_result replay_pass(const tr::trace& t, int device, std::uint32_t slow_ns, bool check_growth,
                        std::vector<unsigned char>& touched) {
  pass_result out;
  std::vector<void*> live(t.allocs, nullptr);
  out.alloc.ns.reserve(t.allocs);
  out.free.ns.reserve(t.frees);
  const umem_torch_device_stats start = device_stats(device);
  std::int64_t reserved_seen = start.reserved_bytes[0].current;
  for (const tr::event& e : t.events) {
    const bool is_alloc = e.op == tr::op_kind::alloc;
    if (!is_alloc && e.op != tr::op_kind::free) continue;
    void*& p = live[static_cast<std::size_t>(e.id)];
    umem_status s = UMEM_OK;
    for (std::size_t i = 0; i < touched.size(); i += 64) ++touched[i];  // Note [Cold calls]
    const auto t0 = clock_type::now();
    if (is_alloc)
      s = umem_torch_extension_alloc(e.size, device, nullptr, &p);
    else
      s = umem_torch_extension_release(p);
    const auto t1 = clock_type::now();
    if (s != UMEM_OK)
      umem::throw_error(umem::errc::runtime_error,
                        t.source + ":" + std::to_string(e.line) + ": " + umem_torch_last_error());
    if (!is_alloc) p = nullptr;
    const auto ns = static_cast<std::uint32_t>(std::min<std::int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), UINT32_MAX));
    kind_result& k = is_alloc ? out.alloc : out.free;
    k.ns.push_back(ns);
    const umem::torch_bridge::call_trace& trace = umem::torch_bridge::last_call_trace();
    k.all.add(trace);
    if (ns <= slow_ns) continue;
    k.slow.add(trace);
    if (!check_growth) continue;
    const std::int64_t reserved = device_stats(device).reserved_bytes[0].current;
    if (reserved > reserved_seen) {
      ++k.slow.grew;
      out.growth_charged += reserved - reserved_seen;
    }
    reserved_seen = reserved;
  }
  const umem_torch_device_stats end = device_stats(device);
  out.growth_bytes = end.reserved_bytes[0].current - start.reserved_bytes[0].current;
  out.device_allocs = end.num_device_alloc - start.num_device_alloc;
  for (void*& p : live)
    if (p != nullptr) {
      umem_torch_extension_release(p);
      p = nullptr;
    }
  return out;
}

void print_row(const std::string& trace, const char* kind, kind_result& k, std::uint32_t slow_ns) {
  std::sort(k.ns.begin(), k.ns.end());
  const auto above = static_cast<std::size_t>(
      k.ns.end() - std::upper_bound(k.ns.begin(), k.ns.end(), slow_ns));
  std::printf("| %s | %s | %zu | %u | %u | %u | %u | %u | %zu |\n", trace.c_str(), kind,
              k.ns.size(), percentile(k.ns, 0.5), percentile(k.ns, 0.9), percentile(k.ns, 0.99),
              percentile(k.ns, 0.999), k.ns.empty() ? 0u : k.ns.back(), above);
}

void print_why(const std::string& trace, const char* kind, const why& slow, const why& all,
               bool check_growth) {
  auto cell = [](std::size_t a, std::size_t b) { return std::to_string(a) + " / " + std::to_string(b); };
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", trace.c_str(), kind,
              cell(slow.calls, all.calls).c_str(), cell(slow.stream_cache, all.stream_cache).c_str(),
              cell(slow.allocator, all.allocator).c_str(),
              cell(slow.release_scan, all.release_scan).c_str(),
              cell(slow.released_blocks, all.released_blocks).c_str(),
              cell(slow.blocks, all.blocks).c_str(), cell(slow.two_locks, all.two_locks).c_str(),
              cell(slow.live_rehash, all.live_rehash).c_str(),
              check_growth ? std::to_string(slow.grew).c_str() : "-");
}

// Note [Where the double's GPU sits]: `t` with its GPUs moved to a PCI device of this machine,
// written to `to`.
void place_gpus_here(umem::topology t, const std::filesystem::path& to) {
  std::vector<std::filesystem::path> devices;
  for (const auto& d : std::filesystem::directory_iterator("/sys/bus/pci/devices"))
    if (std::filesystem::exists(d.path() / "local_cpus")) devices.push_back(d.path());
  std::sort(devices.begin(), devices.end());
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  const auto at = std::find_if(devices.begin(), devices.end(), [&](const auto& d) {
    return std::sscanf(d.filename().c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4 &&
           (bus | dev | fn) != 0;  // BDF 0 means "unknown" to umem
  });
  if (at == devices.end())
    umem::throw_error(umem::errc::not_found,
                      "no PCI device with local_cpus under /sys/bus/pci/devices for the double's GPU");
  for (umem::agent& a : t.agents) {
    a.pci_domain = domain;
    a.bdfid = (bus << 8) | (dev << 3) | fn;
  }
  std::ofstream(to) << umem::snapshot_to_json(t);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One allocation through the torch bridge's C ABI (umem_torch_extension_alloc / "
               "umem_torch_extension_release), timed alone, over real PyTorch traces"};
  std::vector<std::string> paths;
  int passes = 3;
  int device = 0;
  std::uint32_t slow_ns = 3000;
  std::string conf;
  std::string cuda_double;
  std::string snapshot;
  bool no_growth_check = false;
  std::size_t touch_between = 0;
  app.add_option("--trace", paths, "trace files (.csv or .csv.gz), e.g. shared/reference/traces/*")
      ->required();
  app.add_option("--passes", passes, "passes over each trace without emptying (the last is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--device", device, "the GPU index allocations ask for");
  app.add_option("--slow-ns", slow_ns, "a call above this many nanoseconds is slow");
  app.add_option("--conf", conf, "UMEM_ALLOC_CONF text given to umem_torch_init");
  app.add_option("--cuda-double", cuda_double,
                 "serve the GPU from the CUDA test double at this path (the build's: " +
                     std::string(UMEM_TORCH_BENCH_DOUBLE) +
                     ") instead of libcuda.so.1")
      ->expected(0, 1)
      ->default_str(UMEM_TORCH_BENCH_DOUBLE);
  app.add_option("--snapshot", snapshot,
                 "the machine the double serves (with --cuda-double; default: the tests' H200)");
  app.add_flag("--no-growth-check", no_growth_check,
               "do not read the statistics after slow calls (Note [Attributing growth])");
  app.add_option("--touch-between", touch_between,
                 "bytes of other memory written before every call, untimed (Note [Cold calls])");
  CLI11_PARSE(app, argc, argv);
  const bool check_growth = !no_growth_check;
  std::vector<unsigned char> touched(touch_between);
  const std::filesystem::path served =
      std::filesystem::temp_directory_path() /
      ("umem-torch-bridge-bench-" + std::to_string(getpid()) + ".json");
  struct remove_at_exit {
    std::filesystem::path p;
    ~remove_at_exit() {
      std::error_code ignored;
      std::filesystem::remove(p, ignored);
    }
  } cleanup{served};
  try {
    if (app.count("--cuda-double") > 0) {
      if (cuda_double.empty()) cuda_double = UMEM_TORCH_BENCH_DOUBLE;
      place_gpus_here(snapshot.empty() ? umem::test::h200_machine() : umem::load_snapshot(snapshot),
                      served);
      // Before the bridge exists: it discovers the machine once, on umem_torch_init.
      setenv("UMEM_GPU_BACKEND", "cuda", 1);
      setenv("UMEM_CUDA_DRIVER_LIB", cuda_double.c_str(), 1);
      setenv("UMEM_CUDA_DOUBLE_SNAPSHOT", served.c_str(), 1);
    }
    std::vector<tr::trace> traces;
    for (const std::string& p : paths) traces.push_back(tr::load_trace(p));
    if (umem_torch_init(conf.empty() ? nullptr : conf.c_str()) != UMEM_OK)
      umem::throw_error(umem::errc::runtime_error,
                        std::string("umem_torch_init: ") + umem_torch_last_error());
    char* described = umem_torch_describe();
    std::printf("driver: %s\n%s\n\n", cuda_double.empty() ? "libcuda.so.1 (UMEM_CUDA_DRIVER_LIB)"
                                                          : ("CUDA double " + cuda_double).c_str(),
                described != nullptr ? described : umem_torch_last_error());
    umem_torch_string_free(described);
    std::vector<std::pair<std::string, pass_result>> results;
    for (const tr::trace& t : traces) {
      pass_result last;
      for (int pass = 1; pass <= passes; ++pass)
        last = replay_pass(t, device, slow_ns, check_growth, touched);
      results.emplace_back(base_name(t.source), std::move(last));
    }
    std::printf("Pass %d of %d, each call timed alone (ns), slow: above %u ns\n\n", passes, passes,
                slow_ns);
    std::printf("| trace | call | calls | median | p90 | p99 | p99.9 | max | slow |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (auto& [name, r] : results) {
      print_row(name, "alloc", r.alloc, slow_ns);
      print_row(name, "free", r.free, slow_ns);
    }
    std::printf("\nWhat the calls did, slow calls / all calls (Note [Call trace] in bridge.hpp)\n\n");
    std::printf("| trace | call | calls | stream cache | allocator | release scan | released "
                "blocks | blocks released | two locks | live rehash | grew |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (auto& [name, r] : results) {
      print_why(name, "alloc", r.alloc.slow, r.alloc.all, check_growth);
      print_why(name, "free", r.free.slow, r.free.all, check_growth);
    }
    std::printf("\n");
    for (auto& [name, r] : results)
      std::printf("%s: the pass grew the reservation by %lld bytes (%lld device allocations); "
                  "%lld bytes of growth were charged to slow calls\n",
                  name.c_str(), static_cast<long long>(r.growth_bytes),
                  static_cast<long long>(r.device_allocs),
                  static_cast<long long>(r.growth_charged));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "umem-torch-bridge-bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
