// umem-trace-replay: replays PyTorch allocation traces through umem's caching pool and reports
// fragmentation, time per operation and integrity (docs/method/trace-replay.md).
// Exit status: 0 fine, 1 an integrity failure or stream-safety violation, 2 bad usage or input,
// 77 a trace is missing and --skip-missing was given (ctest's skip code).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "replay.hpp"
#include "reserving_source.hpp"
#include "trace_file.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"

namespace {

constexpr int kExitFailures = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkipped = 77;

std::unique_ptr<umem::alloc::upstream_source> make_upstream(const std::string& kind) {
  if (kind == "host")
    return std::make_unique<umem::alloc::host_numa_source>(
        umem::alloc::host_source_config{false, umem::alloc::populate_mode::none});
  return std::make_unique<umem::trace_replay::reserving_source>();
}

}  // namespace

int main(int argc, char** argv) {
  namespace tr = umem::trace_replay;
  CLI::App app{"Replay PyTorch allocation traces through umem's caching pool"};
  std::vector<std::string> paths;
  tr::replay_options options;
  std::string upstream = "reserve";
  bool quick = false;
  bool skip_missing = false;
  std::string label = "umem";
  app.add_option("traces", paths, "trace files (.csv or .csv.gz)")->required();
  app.add_flag("--quick", quick,
               "one pass, a pattern word every 1 MiB, no histogram: for CI (< 60 s)");
  app.add_option("--passes", options.passes, "passes over each trace (the last one is timed)")
      ->check(CLI::Range(1, 100));
  app.add_option("--check-stride", options.check_stride,
                 "bytes between integrity pattern words (power of two)");
  app.add_option("--upstream", upstream,
                 "reserve: address space only (MAP_NORESERVE); host: umem's host_numa_source "
                 "on node 0 (commits what is touched; THP off)")
      ->check(CLI::IsMember({"reserve", "host"}));
  app.add_option("--large-rounding", options.pool.large_segment_rounding,
                 "pool_config::large_segment_rounding");
  app.add_option("--small-max", options.pool.small_max,
                 "pool_config::small_max");
  app.add_option("--small-segment", options.pool.small_segment_size,
                 "pool_config::small_segment_size");
  app.add_option("--small-grow-max", options.pool.small_grow_max,
                 "pool_config::small_grow_max: larger small requests never take a new small "
                 "segment (device pools: 262144)");
  bool no_expandable = false;
  app.add_flag("--no-expandable", no_expandable,
               "pool_config::expandable_segments = false: a new segment per large miss");
  app.add_option("--max-cached", options.pool.max_cached_bytes,
                 "pool_config::max_cached_bytes: most cached bytes kept after a free, by "
                 "returning free segments and then free pages (0: keep everything)");
  app.add_option("--label", label, "the allocator's name in the report (e.g. umem-max-cached)");
  app.add_flag("--skip-missing", skip_missing, "exit 77 (skipped) when a trace is missing");
  CLI11_PARSE(app, argc, argv);
  options.pool.expandable_segments = !no_expandable;
  if (quick) {
    options.passes = 1;
    options.check_stride = std::size_t{1} << 20;
    options.free_histogram = false;
  }

  for (const auto& p : paths)
    if (skip_missing && !std::filesystem::exists(p)) {
      std::printf("SKIPPED: trace %s is absent (the real traces live in "
                  "../shared/reference/traces)\n",
                  p.c_str());
      return kExitSkipped;
    }

  bool failed = false;
  try {
    for (const auto& p : paths) {
      const tr::trace t = tr::load_trace(p);
      const auto source = make_upstream(upstream);
      tr::replay_result res = tr::replay(t, *source, options);
      tr::replay_report& r = res.report;
      r.allocator = label;
      std::fputs(tr::format_text(r).c_str(), stdout);
      const auto cca_alloc = tr::metadata_number(t, "cca_peak_allocated_bytes");
      const auto cca_reserved = tr::metadata_number(t, "cca_peak_reserved_bytes");
      if (cca_alloc != 0)
        std::printf("  recorded CCA peaks  allocated %llu B, reserved %llu B, ratio %.4f\n",
                    static_cast<unsigned long long>(cca_alloc),
                    static_cast<unsigned long long>(cca_reserved),
                    static_cast<double>(cca_reserved) / static_cast<double>(cca_alloc));
      std::fputs(tr::format_result_line(r).c_str(), stdout);
      std::fflush(stdout);
      failed = failed || r.integrity_failures != 0 || r.stream_violations != 0;
    }
  } catch (const umem::error& e) {
    std::fprintf(stderr, "umem-trace-replay: %s\n", e.what());
    return kExitUsage;
  }
  return failed ? kExitFailures : 0;
}
