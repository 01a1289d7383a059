#include "report.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace umem::trace_replay {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string gib(std::uint64_t bytes) {
  return fixed(static_cast<double>(bytes) / static_cast<double>(std::uint64_t{1} << 30), 3) +
         " GiB";
}

std::string size_label(std::uint64_t v) {
  if (v >= (std::uint64_t{1} << 30)) return std::to_string(v >> 30) + " GiB";
  if (v >= (std::uint64_t{1} << 20)) return std::to_string(v >> 20) + " MiB";
  if (v >= (std::uint64_t{1} << 10)) return std::to_string(v >> 10) + " KiB";
  return std::to_string(v) + " B";
}

double nearest_rank(std::vector<std::uint32_t>& v, double q) {
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

latency summarize(std::vector<std::uint32_t>& ns) {
  latency l;
  l.samples = ns.size();
  if (ns.empty()) return l;
  l.median_ns = nearest_rank(ns, 0.5);
  l.p99_ns = nearest_rank(ns, 0.99);
  return l;
}

void describe_trace(replay_report& r, const trace& t, const std::string& name) {
  r.trace_name = name;
  r.metadata = t.metadata;
  r.events = t.events.size();
  r.allocs = t.allocs;
  r.frees = t.frees;
  r.segment_allocs = t.segment_allocs;
  r.segment_frees = t.segment_frees;
  r.syncs = t.syncs;
  r.streams = t.streams.size();
  r.trace_peak_live = t.peak_live_bytes;
}

std::string format_text(const replay_report& r) {
  std::ostringstream s;
  s << "== " << r.trace_name << " through " << r.allocator << "\n"
    << "  upstream            " << r.upstream << "\n"
    << "  events              " << r.events << " (a " << r.allocs << ", f " << r.frees
    << ", S " << r.segment_allocs << ", s " << r.segment_frees << ", e " << r.syncs
    << "; streams " << r.streams << ")\n"
    << "  passes              " << r.passes
    << " (peaks over all passes; times from the last pass, warm cache)\n"
    << "  trace peak live     " << r.trace_peak_live << " B (" << gib(r.trace_peak_live)
    << ", recorded sizes)\n"
    << "  peak allocated      " << r.peak_allocated << " B (" << gib(r.peak_allocated) << ")\n"
    << "  peak reserved       " << r.peak_reserved << " B (" << gib(r.peak_reserved) << ")\n"
    << "  reserved/allocated  " << fixed(r.ratio(), 4) << "\n"
    << "  upstream calls      " << r.upstream_allocs << " allocs, " << r.upstream_frees
    << " frees\n"
    << "  time per op         median " << fixed(r.all.median_ns, 0) << " ns, p99 "
    << fixed(r.all.p99_ns, 0) << " ns over " << r.all.samples << " ops (alloc "
    << fixed(r.alloc.median_ns, 0) << "/" << fixed(r.alloc.p99_ns, 0) << ", free "
    << fixed(r.free.median_ns, 0) << "/" << fixed(r.free.p99_ns, 0) << " ns median/p99)\n";
  if (r.integrity_failures < 0)
    s << "  integrity           not checked\n";
  else
    s << "  integrity           " << r.integrity_failures << " failures over "
      << r.blocks_checked << " blocks (first/last 64 B + 8 B every " << size_label(r.check_stride)
      << " of address, live-range overlap)\n";
  for (const auto& m : r.failure_messages) s << "    " << m << "\n";
  if (r.stream_violations < 0)
    s << "  stream safety       not checked\n";
  else
    s << "  stream safety       " << r.stream_violations << " violations\n";
  if (!r.free_at_peak.empty()) {
    std::uint64_t total = 0;
    for (const auto& b : r.free_at_peak) total += b.small_bytes + b.large_bytes;
    s << "  free space when reserved peaked: " << total << " B (" << gib(total)
      << ") with " << r.allocated_at_peak_reserved << " B allocated\n"
      << "    block size           small pool (n, bytes)        large pool (n, bytes)\n";
    for (const auto& b : r.free_at_peak) {
      if (b.small_blocks + b.large_blocks == 0) continue;
      char line[160];
      std::snprintf(line, sizeof line, "    [%7s, %7s) %6zu %14llu    %6zu %14llu\n",
                    size_label(b.lower).c_str(), size_label(b.upper).c_str(), b.small_blocks,
                    static_cast<unsigned long long>(b.small_bytes), b.large_blocks,
                    static_cast<unsigned long long>(b.large_bytes));
      s << line;
    }
  }
  s << "  wall                " << fixed(r.wall_seconds, 2) << " s\n";
  return s.str();
}

std::string format_result_line(const replay_report& r) {
  std::ostringstream s;
  s << "result," << r.allocator << "," << r.trace_name << "," << r.peak_allocated << ","
    << r.peak_reserved << "," << fixed(r.ratio(), 4) << "," << r.upstream_allocs << ","
    << r.upstream_frees << "," << fixed(r.all.median_ns, 0) << "," << fixed(r.all.p99_ns, 0)
    << "," << r.integrity_failures << "," << r.stream_violations << "\n";
  return s.str();
}

}  // namespace umem::trace_replay
