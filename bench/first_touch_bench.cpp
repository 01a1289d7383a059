#include "first_touch_bench.hpp"

#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <time.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <string>

#include "size_mix.hpp"
#include "umem/allocator/source/host_numa_source.hpp"

namespace umem::bench {
namespace {

constexpr std::size_t touch_bytes = std::size_t{1} << 30;
constexpr std::size_t touch_stride = 4 * KiB;

// CPU time of the calling thread, kernel time (page faults, zeroing, compaction) included.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// AnonHugePages of the whole process, in bytes; 0 when the kernel does not report it.
double anon_huge_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      in >> kib;
      return kib * 1024.0;
    }
    in.ignore(1 << 12, '\n');
  }
  return 0;
}

// A counter of /proc/vmstat (0 when absent): compact_stall counts faults that waited for memory
// compaction to assemble a huge page, thp_fault_fallback those that got small pages instead.
double vmstat(const std::string& name) {
  std::ifstream in("/proc/vmstat");
  std::string key;
  double value = 0;
  while (in >> key >> value)
    if (key == name) return value;
  return 0;
}

void first_touch(benchmark::State& state, int node, bool huge_pages) {
  alloc::host_numa_source source({huge_pages, alloc::populate_mode::none});
  const alloc::node_binding where{alloc::bind_mode::bind, {node}};
  double faults = 0;
  double huge_bytes = 0;
  double cpu_seconds = 0;
  double compact_stalls = 0;
  double thp_fallbacks = 0;
  for (auto _ : state) {
    const alloc::segment s = source.allocate(touch_bytes, where, coherence::fine);
    auto* bytes = static_cast<volatile unsigned char*>(s.base);
    const double huge_before = anon_huge_bytes();
    const long faults_before = minor_faults();
    const double stalls_before = vmstat("compact_stall");
    const double fallbacks_before = vmstat("thp_fault_fallback");
    const double cpu_before = thread_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t off = 0; off < touch_bytes; off += touch_stride) bytes[off] = 1;
    const auto stop = std::chrono::steady_clock::now();
    cpu_seconds += thread_cpu_seconds() - cpu_before;
    faults += static_cast<double>(minor_faults() - faults_before);
    compact_stalls += vmstat("compact_stall") - stalls_before;
    thp_fallbacks += vmstat("thp_fault_fallback") - fallbacks_before;
    huge_bytes += anon_huge_bytes() - huge_before;
    source.deallocate(s);
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  state.counters["page_faults"] = benchmark::Counter(faults, benchmark::Counter::kAvgIterations);
  state.counters["compact_stalls"] =
      benchmark::Counter(compact_stalls, benchmark::Counter::kAvgIterations);
  state.counters["thp_fallbacks"] =
      benchmark::Counter(thp_fallbacks, benchmark::Counter::kAvgIterations);
  state.counters["cpu_ms"] =
      benchmark::Counter(cpu_seconds * 1e3, benchmark::Counter::kAvgIterations);
  state.counters["huge_page_MiB"] =
      benchmark::Counter(huge_bytes / static_cast<double>(MiB), benchmark::Counter::kAvgIterations);
}

}  // namespace

void register_first_touch(int node, int iterations) {
  for (bool huge : {true, false})
    benchmark::RegisterBenchmark(
        (std::string("first_touch/huge_pages:") + (huge ? "on" : "off")).c_str(),
        [node, huge](benchmark::State& s) { first_touch(s, node, huge); })
        ->Iterations(iterations)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
}

}  // namespace umem::bench
