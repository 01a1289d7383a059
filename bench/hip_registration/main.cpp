// umem-hip-registration-bench: what making memory known to HIP (Note [GPU visibility under HIP]
// in hip_gpu_mapper.hpp) adds to a segment's first use and to empty_cache, against ROCr's own
// lock (what umem does without HIP) and against host memory with no GPU mapping, in one run.
//
// For each mapper, an allocator over host NUMA memory on the first GPU's node takes --segments
// blocks of --size bytes (each a new segment of the pool: its first use, which maps it), frees
// them (into the cache: no call; segments neither grow nor sit in thread caches) and trims
// (empty_cache: every segment unmapped, then given back). Reported per segment: microseconds of the
// allocation and of the trim, and the runtime calls made, read from the doubles' own counters (the
// ROCr double's call log, the HIP double's attempts). Between the allocations and the trim, the
// same blocks are allocated and freed again
// --reuse times, and the HIP calls made there are reported too: the cached path must make none.
//
// Where it runs: by default on the test doubles (tests/rocr_double and tests/hip_double, built
// with the tests) serving the one-socket MI300A capture (--rocminfo), XNACK off or on (--xnack);
// there the times are the doubles' and the host's, not a GPU's, and only the call counts
// describe the real runtime. With --rocr and --hip naming the real libhsa-runtime64 and
// libamdhip64 (an MI300A), the times are real and the call counts say n/a.
#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/importers/rocminfo_importer.hpp"
#include "umem/machine/live_machine.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
namespace ua = umem::alloc;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The doubles' counters, when the libraries loaded are the doubles (else each reads -1).
struct counters {
  void* rocr = nullptr;
  void* hip = nullptr;
  long rocr_calls() const {
    auto log = rocr ? reinterpret_cast<const char* (*)()>(dlsym(rocr, "umem_rocr_double_call_log"))
                    : nullptr;
    if (log == nullptr) return -1;
    const std::string text = log();
    return static_cast<long>(std::count(text.begin(), text.end(), '\n'));
  }
  long hip_calls() const {
    auto total =
        hip ? reinterpret_cast<long (*)()>(dlsym(hip, "umem_hip_double_total_attempts")) : nullptr;
    return total != nullptr ? total() : -1;
  }
};

struct row {
  std::string mapper;
  double first_use_us = 0, empty_cache_us = 0;
  long rocr_calls = -1, hip_calls = -1, cached_hip_calls = -1;
  std::size_t segments = 0;
};

long delta(long after, long before) { return after < 0 || before < 0 ? -1 : after - before; }

row measure(const std::string& name, std::unique_ptr<ua::gpu_mapper> mapper,
            const umem::topology& topo, int node, std::size_t segments, std::size_t size, int reuse,
            const counters& c) {
  // Whole segments, none grown in place (a pageable mapper would grow one expandable segment and
  // map it piece by piece), and no thread cache, so that every row counts the same segments.
  ua::allocator a(ua::parse_alloc_conf("expandable_segments:false,thread_cache:0"), topo,
                  std::make_unique<ua::host_numa_source>(ua::host_source_config{}),
                  std::move(mapper), {});
  const ua::request r{ua::parse_placement("node:" + std::to_string(node)), umem::coherence::coarse};
  row out{name};
  const long rocr0 = c.rocr_calls(), hip0 = c.hip_calls();
  std::vector<void*> blocks(segments);
  auto t0 = clock_type::now();
  for (auto& p : blocks) p = a.allocate(size, r);
  auto t1 = clock_type::now();
  out.segments = static_cast<std::size_t>(a.memory_stats().at("segment.all.current"));
  for (void* p : blocks) a.deallocate(p);
  const long hip1 = c.hip_calls();
  for (int i = 0; i < reuse; ++i) {
    for (auto& p : blocks) p = a.allocate(size, r);
    for (void* p : blocks) a.deallocate(p);
  }
  out.cached_hip_calls = delta(c.hip_calls(), hip1);
  auto t2 = clock_type::now();
  a.trim();
  auto t3 = clock_type::now();
  const double n = static_cast<double>(std::max<std::size_t>(out.segments, 1));
  out.first_use_us = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  out.empty_cache_us = std::chrono::duration<double, std::micro>(t3 - t2).count() / n;
  const long rocr = delta(c.rocr_calls(), rocr0), hip = delta(c.hip_calls(), hip0);
  out.rocr_calls = rocr < 0 ? -1 : rocr;
  out.hip_calls = hip < 0 ? -1 : hip - std::max(out.cached_hip_calls, 0L);
  return out;
}

std::string per_segment(long calls, std::size_t segments) {
  if (calls < 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f",
                static_cast<double>(calls) / static_cast<double>(segments));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What registering segments with HIP costs (hip_gpu_mapper.hpp)"};
  std::string rocr = UMEM_HIP_BENCH_ROCR_DOUBLE, hip = UMEM_HIP_BENCH_HIP_DOUBLE;
  std::string rocminfo = UMEM_HIP_BENCH_CAPTURE;
  std::string xnack = "off";
  std::size_t segments = 64, size = std::size_t{2} << 20;
  int reuse = 10;
  app.add_option("--rocr", rocr, "libhsa-runtime64 to use (default: the ROCr test double)");
  app.add_option("--hip", hip, "libamdhip64 to map (default: the HIP test double)");
  app.add_option("--rocminfo", rocminfo, "the machine the ROCr double serves (a rocminfo capture)");
  app.add_option("--xnack", xnack, "XNACK as the ROCr double reports it")
      ->check(CLI::IsMember({"off", "on"}));
  app.add_option("--segments", segments, "segments per mapper");
  app.add_option("--size", size, "bytes per block: one block a segment");
  app.add_option("--reuse", reuse, "cached rounds between first use and empty_cache");
  CLI11_PARSE(app, argc, argv);
  try {
    const bool doubles = rocr == UMEM_HIP_BENCH_ROCR_DOUBLE;
    const auto dir =
        std::filesystem::temp_directory_path() / ("umem-hip-bench-" + std::to_string(getpid()));
    if (doubles) {
      umem::topology machine = umem::importers::import_rocminfo(read_text(rocminfo), rocminfo).topo;
      machine.hsa.xnack_enabled = xnack == "on";
      machine.hsa.svm_accessible_by_default = xnack == "on";
      std::filesystem::create_directories(dir);
      umem::save_snapshot(machine, dir / "machine.json");
      setenv("UMEM_ROCR_DOUBLE_SNAPSHOT", (dir / "machine.json").c_str(), 1);
      setenv("UMEM_ROCR_DOUBLE_VERSION", "7.1", 1);
    }
    setenv("UMEM_HSA_RUNTIME_LIB", rocr.c_str(), 1);
    setenv("UMEM_GPU_BACKEND", "rocr", 1);
    // The live machine before HIP is mapped: the ROCr backend without HIP locks segments itself.
    umem::machine::live_machine m = umem::machine::discover_live_machine();
    if (m.runtime->kind() != umem::machine::gpu_runtime_kind::rocr) {
      std::fprintf(stderr, "umem-hip-registration-bench: no ROCr here: %s\n",
                   m.topo.gpu_backend.reason.c_str());
      return 1;
    }
    const int node = m.topo.gpu_numa.empty() || !m.topo.gpu_numa.front().numa_node
                         ? 0
                         : *m.topo.gpu_numa.front().numa_node;
    counters c;
    c.rocr = dlopen(rocr.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    std::vector<row> rows;
    // Unreported: the process's first segments pay for mapping fresh address space.
    (void)measure("warm-up", std::make_unique<ua::no_gpu_mapper>("bench"), m.topo, node, segments,
                  size, reuse, c);
    rows.push_back(measure("host only (anchor)", std::make_unique<ua::no_gpu_mapper>("bench"),
                           m.topo, node, segments, size, reuse, c));
    rows.push_back(measure("ROCr lock (no HIP)", ua::make_gpu_mapper(*m.runtime, m.topo), m.topo,
                           node, segments, size, reuse, c));
    c.hip = dlopen(hip.c_str(), RTLD_NOW | RTLD_GLOBAL);  // as PyTorch for ROCm maps it
    if (c.hip == nullptr) throw std::runtime_error("cannot map " + hip + ": " + dlerror());
    if (auto attach =
            reinterpret_cast<int (*)(const char*)>(dlsym(c.hip, "umem_hip_double_attach_rocr")))
      if (attach(rocr.c_str()) != 0)
        throw std::runtime_error("the HIP double cannot attach to " + rocr);
    setenv("UMEM_HIP_RUNTIME_LIB", hip.c_str(), 1);
    auto with_hip = umem::machine::make_rocr_runtime(m.rocr, "bench");
    rows.push_back(measure("HIP registration", ua::make_gpu_mapper(*with_hip, m.topo), m.topo,
                           node, segments, size, reuse, c));

    std::printf("%s, XNACK %s, %zu segments of %zu bytes per mapper%s\n\n",
                doubles ? "test doubles (times are not a GPU's)" : "real runtime",
                doubles ? xnack.c_str() : "as the runtime reports", segments, size,
                doubles ? "" : " (call counts n/a)");
    std::printf(
        "| mapper | first use us/segment | empty_cache us/segment | ROCr calls/segment | "
        "HIP calls/segment | HIP calls on the cached path |\n|---|---|---|---|---|---|\n");
    for (const row& r : rows)
      std::printf("| %s | %.1f | %.1f | %s | %s | %s |\n", r.mapper.c_str(), r.first_use_us,
                  r.empty_cache_us, per_segment(r.rocr_calls, r.segments).c_str(),
                  per_segment(r.hip_calls, r.segments).c_str(),
                  r.cached_hip_calls < 0 ? "n/a" : std::to_string(r.cached_hip_calls).c_str());
    std::filesystem::remove_all(dir);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "umem-hip-registration-bench: %s\n", e.what());
    return 1;
  }
}
