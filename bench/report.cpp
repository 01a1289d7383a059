// umem_bench_report: turns the Google Benchmark JSON files of umem_bench (one per process:
// glibc + everything else, then jemalloc and mimalloc preloaded; several rounds of them) into one
// markdown document with the comparison tables and the issue's targets as PASS/FAIL lines. Prints
// it and writes it.
//
//   umem_bench_report --out FILE --command TEXT --settings TEXT results.json...
//
// Note [Size classes]
// The issue sets different targets below and above 64 KiB ("small" and "large"): single sizes
// are classed by that boundary, and the small and large mixes stay on their side of it.
//
// Note [Time per operation]
// The tables show CPU time per operation (kernel time included: page faults, mmap, munmap):
// Google Benchmark sums the threads' CPU time and divides by all their operations, so 1- and
// 2-thread numbers compare directly. CPU time, not wall time, because the machine these run on
// is shared (its load average is printed): other processes stretch wall time at random but do
// not add to our threads' CPU time. What CPU time misses is time a thread spends blocked (a
// contended mutex sleeping in futex), so the mix table also shows wall time per operation per
// thread: Google Benchmark's real time for a multi-threaded run is wall time divided by the
// operations of all threads, multiplied back here by the thread count.
//
// Note [Rounds]
// A benchmark that appears in several files (bench/run-benchmarks.sh runs every process once per
// round and family, the contenders' processes one after the other) is reported as its fastest
// round. On the shared 2-core virtual machines these run on, every allocator's single-size rows
// flip between two speeds a factor of about 2 apart, from one process to the next and within
// seconds (umem at 256 B: 11.2-12.1 or 19-22 ns in back-to-back processes, jemalloc 6.2-7.3 or
// 12.1-14.2 ns; the same with address randomization off, so not the memory layout: another
// tenant on the core's other hardware thread is the likely cause). Interference only adds time, so
// the fastest of several independent rounds is each allocator's own speed, where a median of
// three lands in either mode and decided rows by chance. A failed run counts as the slowest.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench_method.hpp"
#include "umem/core/detail/text.hpp"

namespace {

using nlohmann::json;

struct result {
  double ns = 0;       // CPU time per operation (Note [Time per operation])
  double wall_ns = 0;  // wall-clock time per operation per thread
  std::map<std::string, double> counters;
  std::string error;
};

struct key {
  std::string family;     // alloc_free, mix, first_touch
  std::string contender;  // umem, glibc, ... (first_touch: huge_pages:on|off)
  std::string what;       // size:<bytes>, small|large|all ("" for first_touch)
  int threads = 1;
  auto operator<=>(const key&) const = default;
};

struct results {
  std::map<key, result> runs;                   // the fastest of the files (Note [Rounds])
  std::map<key, std::vector<result>> samples;  // one per file, until settle()
  std::vector<std::string> malloc_evidence;
  std::map<std::string, std::string> context;  // of the main (glibc) process
  std::string library_build_type;              // of Google Benchmark itself
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, sep);) out.push_back(part);
  return out;
}

double to_ns(double value, const std::string& unit) {
  if (unit == "us") return value * 1e3;
  if (unit == "ms") return value * 1e6;
  if (unit == "s") return value * 1e9;
  return value;
}

void load(const std::string& path, results& r) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  // Google Benchmark writes NaN (e.g. the coefficient of variation of zeros) as a bare NaN,
  // which is not JSON; those values are never used here.
  const json j = json::parse(std::regex_replace(text.str(), std::regex(R"(: -?(NaN|nan|inf)\b)"),
                                                ": null"));
  const json& ctx = j.at("context");
  if (ctx.contains("malloc_evidence")) {
    const auto evidence = ctx.at("malloc_evidence").get<std::string>();
    if (std::find(r.malloc_evidence.begin(), r.malloc_evidence.end(), evidence) ==
        r.malloc_evidence.end())
      r.malloc_evidence.push_back(evidence);
  }
  if (ctx.value("malloc", "") == "glibc" && r.context.empty()) {
    for (const auto& [k, v] : ctx.items())
      if (v.is_string()) r.context[k] = v.get<std::string>();
    if (ctx.contains("load_avg")) {
      std::string load;
      for (const json& x : ctx.at("load_avg"))
        load += (load.empty() ? "" : ", ") + std::to_string(x.get<double>()).substr(0, 4);
      r.context["load_avg"] = load;
    }
  }
  std::map<key, result> file;
  for (const json& b : j.at("benchmarks")) {
    const std::string run_type = b.value("run_type", "iteration");
    // With repetitions only the median is used; a single repetition has only iteration rows.
    if (run_type == "aggregate" && b.value("aggregate_name", "") != "median") continue;
    const auto parts = split(b.at("run_name").get<std::string>(), '/');
    if (parts.size() < 2) continue;
    key k{parts[0], parts[1], parts.size() > 2 && parts[0] != "first_touch" ? parts[2] : "",
          b.value("threads", 1)};
    if (run_type == "iteration" && file.count(k) != 0) continue;  // keep the median
    result x;
    if (b.value("error_occurred", false)) x.error = b.value("error_message", "error");
    const std::string unit = b.value("time_unit", "ns");
    x.ns = to_ns(b.value("cpu_time", 0.0), unit);
    x.wall_ns = to_ns(b.value("real_time", 0.0), unit) * k.threads;
    for (const char* c :
         {"page_faults", "huge_page_MiB", "cpu_ms", "compact_stalls", "thp_fallbacks",
          "faults_per_op"})
      if (b.contains(c) && b.at(c).is_number()) x.counters[c] = b.at(c).get<double>();
    file[k] = x;
  }
  for (auto& [k, x] : file) r.samples[k].push_back(std::move(x));
}

// Each benchmark's fastest round (Note [Rounds]); a failed run only when every round failed.
void settle(results& r) {
  for (auto& [k, xs] : r.samples) {
    auto faster = [](const result& a, const result& b) {
      if (a.error.empty() != b.error.empty()) return !b.error.empty();
      return a.ns < b.ns;
    };
    r.runs[k] = *std::min_element(xs.begin(), xs.end(), faster);
  }
  r.samples.clear();
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Three significant digits.
std::string sig3(double v) { return fixed(v, v < 10 ? 2 : v < 100 ? 1 : 0); }

std::string duration(double ns) {
  if (ns < 1e3) return sig3(ns) + " ns";
  if (ns < 1e6) return sig3(ns / 1e3) + " µs";
  if (ns < 1e9) return sig3(ns / 1e6) + " ms";
  return sig3(ns / 1e9) + " s";
}

std::string ratio(double x) { return (x < 10 ? fixed(x, x < 1 ? 2 : 1) : fixed(x, 0)) + "x"; }

std::string bytes_label(std::size_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b >= (1u << 10) && b % (1u << 10) == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

constexpr std::size_t large_threshold = 64 * 1024;

const std::vector<std::pair<std::string, std::string>> contenders = {
    {"umem", "umem"},
    {"umem_pool", "umem locked path*"},
    {"glibc", "glibc malloc"},
    {"jemalloc", "jemalloc"},
    {"mimalloc", "mimalloc"},
    {"numa_alloc_onnode", "numa_alloc_onnode"},
    {"hwloc_alloc_membind", "hwloc_alloc_membind"},
    {"mmap_mbind", "mmap+mbind"},
};

class report {
 public:
  explicit report(const results& r) : r_(r) {}

  const result* find(const std::string& family, const std::string& contender,
                     const std::string& what, int threads) const {
    auto it = r_.runs.find({family, contender, what, threads});
    return it == r_.runs.end() || !it->second.error.empty() ? nullptr : &it->second;
  }

  // `metric`: &result::ns (CPU) or &result::wall_ns.
  std::string cell(const std::string& family, const std::string& contender,
                   const std::string& what, int threads, double result::*metric) const {
    auto it = r_.runs.find({family, contender, what, threads});
    if (it == r_.runs.end()) return "n/a";
    if (!it->second.error.empty()) return "error: " + it->second.error;
    std::string s = duration(it->second.*metric);
    const result* base = find(family, "umem", what, threads);
    if (contender != "umem" && base != nullptr)
      s += " (" + ratio(it->second.*metric / base->*metric) + ")";
    return s;
  }

  std::string table_header(const std::string& first) const {
    std::string h = "| " + first + " |", rule = "|---|";
    for (const auto& [id, label] : contenders) {
      h += " " + label + " |";
      rule += "---:|";
    }
    return h + "\n" + rule + "\n";
  }

  std::vector<std::size_t> sizes() const {
    std::vector<std::size_t> out;
    for (const auto& [k, v] : r_.runs)
      if (k.family == "alloc_free" && k.what.starts_with("size:"))
        out.push_back(std::stoull(k.what.substr(5)));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  std::string single_table(int threads) const {
    std::string t = table_header("size");
    for (std::size_t b : sizes()) {
      t += "| " + bytes_label(b) + (b < large_threshold ? " (small)" : " (large)") + " |";
      for (const auto& [id, label] : contenders)
        t += " " + cell("alloc_free", id, "size:" + std::to_string(b), threads, &result::ns) +
             " |";
      t += "\n";
    }
    return t;
  }

  std::string mix_table(double result::*metric) const {
    std::string t = table_header("mix, threads");
    for (const char* mix : {"small", "large", "all"})
      for (int threads : {1, 2}) {
        t += std::string("| ") + mix + ", " + std::to_string(threads) + " |";
        for (const auto& [id, label] : contenders)
          t += " " + cell("mix", id, mix, threads, metric) + " |";
        t += "\n";
      }
    return t;
  }

  // Page faults per operation in the timed loops of the mixes.
  std::string mix_fault_table() const {
    std::string t = table_header("mix, threads");
    for (const char* mix : {"small", "large", "all"})
      for (int threads : {1, 2}) {
        t += std::string("| ") + mix + ", " + std::to_string(threads) + " |";
        for (const auto& [id, label] : contenders) {
          const result* x = find("mix", id, mix, threads);
          t += " " + (x && x->counters.count("faults_per_op")
                          ? fixed(x->counters.at("faults_per_op"), 3)
                          : std::string("n/a")) +
               " |";
        }
        t += "\n";
      }
    return t;
  }

  std::string contention_table() const {
    std::string t = "| contender | 256 B | 1 MiB | small mix | large mix | all mix |\n"
                    "|---|---:|---:|---:|---:|---:|\n";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"alloc_free", "size:256"}, {"alloc_free", "size:1048576"}, {"mix", "small"},
        {"mix", "large"}, {"mix", "all"}};
    for (const auto& [id, label] : contenders) {
      t += "| " + label + " |";
      for (const auto& [family, what] : cases) {
        const result* one = find(family, id, what, 1);
        const result* two = find(family, id, what, 2);
        t += " " + (one && two ? ratio(two->ns / one->ns) + " / " + ratio(two->wall_ns / one->wall_ns)
                               : std::string("n/a")) +
             " |";
      }
      t += "\n";
    }
    return t;
  }

  std::string first_touch_table() const {
    std::string t =
        "| huge pages | wall time | CPU time | minor page faults | huge-page backed | "
        "compaction stalls | THP fallbacks |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for (const char* mode : {"on", "off"}) {
      const result* x = find("first_touch", std::string("huge_pages:") + mode, "", 1);
      if (x == nullptr) {
        t += std::string("| ") + mode + " | n/a | n/a | n/a | n/a | n/a | n/a |\n";
        continue;
      }
      t += std::string("| ") + (mode == std::string("on") ? "on (MADV_HUGEPAGE)" : "off (MADV_NOHUGEPAGE)") +
           " | " + duration(x->wall_ns) + " | " + duration(x->counters.at("cpu_ms") * 1e6) +
           " | " + fixed(x->counters.at("page_faults"), 0) + " | " +
           fixed(x->counters.at("huge_page_MiB"), 0) + " MiB | " +
           fixed(x->counters.at("compact_stalls"), 0) + " | " +
           fixed(x->counters.at("thp_fallbacks"), 0) + " |\n";
    }
    return t;
  }

  // One target row: checks `ok(umem, other)` on each case, lists the failures; `shown` names
  // `other` in them (default: its own name).
  struct check {
    std::string scope;
    std::string family;
    std::vector<std::string> cases;
    int threads;
  };
  template <class Ok>
  std::string target_rows(const std::string& target, const std::string& other,
                          const std::vector<check>& checks, Ok ok,
                          const std::string& shown = {}) const {
    const std::string& name = shown.empty() ? other : shown;
    std::string rows;
    for (const check& c : checks) {
      std::vector<std::string> fails, passes;
      bool missing = false;
      for (const std::string& what : c.cases) {
        const result* u = find(c.family, "umem", what, c.threads);
        const result* o = find(c.family, other, what, c.threads);
        if (!u || !o) {
          missing = true;
          continue;
        }
        const std::string label = what.starts_with("size:")
                                      ? bytes_label(std::stoull(what.substr(5)))
                                      : what + " mix";
        const std::string line = label + ": umem " + duration(u->ns) + ", " + name + " " +
                                 duration(o->ns) + " (" + ratio(o->ns / u->ns) + ")";
        (ok(u->ns, o->ns) ? passes : fails).push_back(line);
      }
      std::string verdict = missing ? "n/a" : fails.empty() ? "**PASS**" : "**FAIL**";
      std::string detail;
      for (const auto& f : fails.empty() ? passes : fails) detail += (detail.empty() ? "" : "; ") + f;
      if (missing) detail = name + " or umem not measured";
      rows += "| " + target + " | " + c.scope + " | " + verdict + " | " + detail + " |\n";
    }
    return rows;
  }

  std::string targets() const {
    std::vector<std::string> small, large, reuse;
    for (std::size_t b : sizes()) {
      const std::string w = "size:" + std::to_string(b);
      (b < large_threshold ? small : large).push_back(w);
      if (b >= (1u << 20) && b <= (64u << 20)) reuse.push_back(w);
    }
    std::string t = "| target | scope | result | numbers (contender time, its ratio to umem) |\n"
                    "|---|---|---|---|\n";
    auto scopes = [](const std::vector<std::string>& sizes, const std::string& mix) {
      return std::vector<check>{{"single sizes, 1 thread", "alloc_free", sizes, 1},
                                {"single sizes, 2 threads", "alloc_free", sizes, 2},
                                {mix + " mix, 1 thread", "mix", {mix}, 1},
                                {mix + " mix, 2 threads", "mix", {mix}, 2}};
    };
    t += target_rows("cached path >= 64 KiB: at least as fast as mimalloc", "mimalloc",
                     scopes(large, "large"), [](double u, double o) { return u <= o; });
    t += target_rows("cached path < 64 KiB: within 2x of mimalloc", "mimalloc",
                     scopes(small, "small"), [](double u, double o) { return u <= 2 * o; });
    // The same pool without thread caches: what the default must never lose to.
    const std::vector<std::string> every_mix{"small", "large", "all"};
    t += target_rows("default no slower than the locked path*", "umem_pool",
                     {{"every mix, 1 thread", "mix", every_mix, 1},
                      {"every mix, 2 threads", "mix", every_mix, 2}},
                     [](double u, double o) { return u <= o; }, "locked path");
    t += target_rows("reuse 1-64 MiB: 100x faster than numa_alloc_onnode", "numa_alloc_onnode",
                     {{"single sizes, 1 thread", "alloc_free", reuse, 1},
                      {"single sizes, 2 threads", "alloc_free", reuse, 2}},
                     [](double u, double o) { return o >= 100 * u; });
    const result* on = find("first_touch", "huge_pages:on", "", 1);
    const result* off = find("first_touch", "huge_pages:off", "", 1);
    if (on && off) {
      const double f_on = on->counters.at("page_faults"), f_off = off->counters.at("page_faults");
      const double cut = f_off / std::max(f_on, 1.0);
      t += "| huge pages cut page faults of a 1 GiB first touch >= 100x | host_numa_source, "
           "populate none | " + std::string(cut >= 100 ? "**PASS**" : "**FAIL**") + " | " +
           fixed(f_off, 0) + " faults without, " + fixed(f_on, 0) + " with: " + ratio(cut) +
           " fewer; wall time " + duration(off->wall_ns) + " without, " + duration(on->wall_ns) +
           " with |\n";
    } else {
      t += "| huge pages cut page faults of a 1 GiB first touch >= 100x | | n/a | not measured |\n";
    }
    return t;
  }

 private:
  const results& r_;
};

std::string ctx(const results& r, const std::string& k) {
  auto it = r.context.find(k);
  return it == r.context.end() ? "unknown" : it->second;
}

// Multi-line text as one markdown list item.
std::string one_line(std::string s) {
  for (std::size_t at; (at = s.find('\n')) != std::string::npos;) s.replace(at, 1, "; ");
  return s;
}

std::string document(const results& r, const std::string& command, const std::string& settings) {
  const report rep(r);
  std::ostringstream d;
  d << "# umem allocator benchmarks\n\n"
    << "Generated " << umem::detail::utc_now("%Y-%m-%d %H:%M UTC") << " by `" << command << "` (" << settings
    << "). Do not edit by hand: run the command again.\n\n"
    << "## Machine\n\n"
    << "- CPU: " << ctx(r, "cpu_model") << ", " << ctx(r, "online_cpus")
    << " online CPUs; NUMA node used: " << ctx(r, "node") << "\n"
    << "- Kernel: " << ctx(r, "kernel") << "\n"
    << "- Transparent huge pages: enabled `" << ctx(r, "thp_enabled") << "`, defrag `"
    << ctx(r, "thp_defrag") << "`, khugepaged defrag `" << ctx(r, "thp_khugepaged_defrag")
    << "`\n"
    << "- Load average when the main process started (1, 5, 15 min): " << ctx(r, "load_avg")
    << " (the machine is shared; see Method for why times are CPU time)\n"
    << "- Google Benchmark library build: " << ctx(r, "library_build_type")
    << " (the distribution's; it affects only the harness, the same for every allocator)\n"
    << "- umem: " << one_line(ctx(r, "umem")) << "\n";
  for (const auto& e : r.malloc_evidence) d << "- malloc process: " << e << "\n";
  d << "\n## Method\n\n"
    << "- One operation = allocate, write the first 64-byte cache line, free; the same for every "
       "allocator, so allocators that hand out unbacked memory (mmap, numa_alloc_onnode, hwloc) "
       "pay the page fault a real use pays.\n"
    << "- Times are CPU time per operation (user + kernel, so page faults, mmap and munmap "
       "count), the fastest of the rounds: every round runs each process once, the contenders' "
       "processes one after the other, and interference from the shared machine only adds time "
       "(Note [Rounds] in bench/report.cpp). Not wall time, because this machine is shared and "
       "other processes stretch wall time at random. With 2 threads CPU time is per operation "
       "of one thread; time a thread spends blocked on a contended lock is not CPU time, so "
       "the mixes and the contention table also give wall-clock time.\n"
    << "- Before every run umem's caches are trimmed. Each thread then warms up untimed in "
       "passes (one operation, or the whole mix) until "
    << umem::bench::fault_free_passes
    << " passes in a row cause no page fault, or one faults on half of its operations or more "
       "(nothing kept backed), or "
    << umem::bench::max_warm_passes
    << " passes (Note [Warm state] in bench/alloc_free_bench.hpp): caching allocators are "
       "measured on their cached path with their memory backed, i.e. on reuse.\n"
    << "- Mixes: a fixed sequence of " << umem::bench::mix_length
    << " sizes, log-uniform (small: 256 B-64 KiB, large: 64 KiB-256 MiB, all: 256 B-256 MiB); "
       "each thread keeps "
    << umem::bench::mix_live_blocks << " blocks live and frees the oldest before each allocation.\n"
    << "- jemalloc and mimalloc replace malloc in processes of their own (LD_PRELOAD), so the "
       "glibc numbers come from a process they never touched; each process proves which "
       "allocator serves malloc (lines above).\n"
    << "- 2 threads = both cores of this machine; every thread uses the same allocator (for "
       "umem: the same node-0 pool).\n"
    << "- Ratios in parentheses: contender time / umem time; above 1x umem is faster.\n"
    << "- *umem locked path: umem's caching_pool called directly with thread caches off, so "
       "every call takes the pool's lock (what umem costs without Note [Fast path]: a thread's "
       "first use of a size, frees on another thread); the default must be no slower on every mix "
       "(Targets).\n\n"
    << "## Targets\n\n" << rep.targets()
    << "\n## alloc+free of one size, 1 thread\n\n" << rep.single_table(1)
    << "\n## alloc+free of one size, 2 threads\n\n" << rep.single_table(2)
    << "\n## Size mixes, CPU time (small < 64 KiB <= large)\n\n" << rep.mix_table(&result::ns)
    << "\n## Size mixes, wall-clock time per operation per thread (includes waiting and other "
       "processes)\n\n"
    << rep.mix_table(&result::wall_ns)
    << "\n## Size mixes, page faults per operation in the timed loop\n\n"
    << "Caching allocators that keep their memory backed have none. Every warm-up ended with "
       "fault-free passes where an allocator got there (Method), so faults here are blocks "
       "placed at addresses of cached memory never written before. With huge pages each costs "
       "milliseconds here, so a few per thousand operations make a mix's time.\n\n"
    << rep.mix_fault_table()
    << "\n## Contention: time with 2 threads / time with 1 thread, CPU / wall (1.0x = none)\n\n"
    << "This machine has one NUMA node, so threads on different nodes cannot be compared here; "
       "these are 2 threads on one node (for umem: one pool, one mutex). A wall ratio well above "
       "the CPU ratio means waiting (or other processes taking the cores).\n\n"
    << rep.contention_table()
    << "\n## First touch of 1 GiB (umem host_numa_source, populate none, one write per 4 KiB)\n\n"
    << rep.first_touch_table();
  return d.str();
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, command = "bench/run-benchmarks.sh", settings;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--out" || a == "--command" || a == "--settings") && i + 1 < argc)
      (a == "--out" ? out : a == "--command" ? command : settings) = argv[++i];
    else
      inputs.push_back(a);
  }
  if (inputs.empty()) {
    std::cerr << "usage: umem_bench_report [--out FILE] [--command TEXT] [--settings TEXT] "
                 "results.json...\n";
    return 2;
  }
  try {
    results r;
    for (const auto& path : inputs) load(path, r);
    settle(r);
    const std::string doc = document(r, command, settings);
    std::cout << doc;
    if (!out.empty()) {
      std::ofstream f(out);
      f << doc;
      if (!f) throw std::runtime_error("cannot write " + out);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "umem_bench_report: " << e.what() << "\n";
    return 1;
  }
}
