// umem_bench: Google Benchmark comparisons of umem's allocator.
// bench/run-benchmarks.sh runs it once plainly (umem, glibc, libnuma, hwloc, mmap+mbind, first
// touch) and once per preloaded malloc (jemalloc, mimalloc) with --malloc-only, then formats all
// results with umem_bench_report.
//
// Own flags (removed before Google Benchmark sees the rest):
//   --node=N               NUMA node every placed contender binds to (default 0)
//   --malloc-only          register only the malloc() contender (the preloaded processes)
//   --expect-malloc=NAME   fail unless malloc() is served by NAME (glibc, jemalloc, mimalloc)
//   --first-touch-iterations=N   1 GiB first touches per run (default 3)
#include <benchmark/benchmark.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "alloc_free_bench.hpp"
#include "contenders.hpp"
#include "first_touch_bench.hpp"
#include "malloc_identity.hpp"

namespace {

// The Setup of every alloc+free run (alloc_free_bench.hpp, Note [Warm state]). A plain function
// pointer is what Google Benchmark takes, hence this one file-level pointer.
umem::bench::contender_set* contenders = nullptr;

void before_run(const benchmark::State&) {
  if (contenders != nullptr) contenders->trim();
  umem::bench::reset_joint_warm_up();
}

struct options {
  int node = 0;
  bool malloc_only = false;
  std::string expect_malloc;
  int first_touch_iterations = 3;
};

// Takes our flags out of argv, leaving Google Benchmark's.
options take_own_flags(int& argc, char** argv) {
  options o;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](std::string_view flag) { return std::string(arg.substr(flag.size())); };
    if (arg.starts_with("--node="))
      o.node = std::stoi(value("--node="));
    else if (arg == "--malloc-only")
      o.malloc_only = true;
    else if (arg.starts_with("--expect-malloc="))
      o.expect_malloc = value("--expect-malloc=");
    else if (arg.starts_with("--first-touch-iterations="))
      o.first_touch_iterations = std::stoi(value("--first-touch-iterations="));
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return o;
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("model name"))
      if (auto colon = line.find(':'); colon != std::string::npos) return line.substr(colon + 2);
  return "unknown";
}

// Recorded in the JSON "context" of every results file, for the report's machine section.
void add_machine_context() {
  utsname u{};
  uname(&u);
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("online_cpus", std::to_string(sysconf(_SC_NPROCESSORS_ONLN)));
  benchmark::AddCustomContext("kernel", std::string(u.sysname) + " " + u.release + " " + u.machine);
  const std::string thp = "/sys/kernel/mm/transparent_hugepage/";
  benchmark::AddCustomContext("thp_enabled", first_line(thp + "enabled"));
  benchmark::AddCustomContext("thp_defrag", first_line(thp + "defrag"));
  benchmark::AddCustomContext("thp_khugepaged_defrag", first_line(thp + "khugepaged/defrag"));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const options o = take_own_flags(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

    const umem::bench::malloc_identity m = umem::bench::identify_malloc();
    if (!o.expect_malloc.empty() && m.name != o.expect_malloc) {
      std::fprintf(stderr, "umem_bench: expected malloc() to be %s, but it is %s (%s)\n",
                   o.expect_malloc.c_str(), m.name.c_str(), m.evidence.c_str());
      return 1;
    }
    benchmark::AddCustomContext("malloc", m.name);
    benchmark::AddCustomContext("malloc_evidence", m.evidence);
    add_machine_context();

    umem::bench::register_alloc_free(m.name, umem::bench::malloc_contender{}, before_run);
    // Declared here so that it outlives the benchmarks that refer to it.
    std::unique_ptr<umem::bench::contender_set> set;
    if (!o.malloc_only) {
      set = std::make_unique<umem::bench::contender_set>(o.node);
      contenders = set.get();
      benchmark::AddCustomContext("umem", set->umem_description());
      benchmark::AddCustomContext("node", std::to_string(o.node));
      umem::bench::register_alloc_free("umem", set->umem(), before_run);
      umem::bench::register_alloc_free("umem_pool", set->umem_pool(), before_run);
      umem::bench::register_alloc_free("numa_alloc_onnode", set->numa(), before_run);
      umem::bench::register_alloc_free("hwloc_alloc_membind", set->hwloc(), before_run);
      umem::bench::register_alloc_free("mmap_mbind", set->mmap_mbind(), before_run);
      umem::bench::register_first_touch(o.node, o.first_touch_iterations);
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "umem_bench: %s\n", e.what());
    return 1;
  }
}
