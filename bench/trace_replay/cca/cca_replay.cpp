// cca-trace-replay: replays a trace through PyTorch's CUDA caching allocator from C++
// (c10::cuda::CUDACachingAllocator raw_alloc_with_stream / raw_delete), the same way and with the
// same report as umem-trace-replay (replay.hpp Note [Passes and what is measured]): `passes`
// passes on one allocator, never emptied in between, peaks from the allocator's device stats
// over all passes, each raw call timed alone with steady_clock in the last pass.
// Built on the H200 machine against the installed libtorch by run-on-h200.sh.
//
// Stream column: stream 0 is the device's default stream, every other id one stream from the
// pool. `e` lines need nothing here: the CCA keeps freed blocks per stream. No integrity check:
// the blocks are device memory, and a pattern written there would be kernels in the timing.
//
// Usage: cca-trace-replay [--passes N] [--label NAME] TRACE.csv [DISPLAY_NAME]
// (a plain CSV; run-on-h200.sh gunzips the .csv.gz first). Exit 0 fine, 2 bad input.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "report.hpp"
#include "trace.hpp"
#include "umem/core/error.hpp"

namespace {

namespace alloc_api = c10::cuda::CUDACachingAllocator;
namespace tr = umem::trace_replay;
using clock_type = std::chrono::steady_clock;

std::uint32_t elapsed_ns(clock_type::time_point a, clock_type::time_point b) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
  return ns > std::numeric_limits<std::uint32_t>::max()
             ? std::numeric_limits<std::uint32_t>::max()
             : static_cast<std::uint32_t>(ns);
}

tr::replay_report replay(const tr::trace& t, std::size_t passes, const std::string& label,
                         const std::string& name) {
  const auto started = clock_type::now();
  tr::replay_report r;
  r.allocator = label;
  tr::describe_trace(r, t, name);
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  r.upstream = std::string("cudaMalloc via c10 CUDACachingAllocator (PYTORCH_CUDA_ALLOC_CONF=") +
               (conf ? conf : "") + ")";
  r.passes = passes;

  const c10::DeviceIndex device = 0;
  std::map<std::uint32_t, cudaStream_t> streams;
  for (std::uint32_t s : t.streams)
    streams[s] = s == 0 ? c10::cuda::getDefaultCUDAStream(device).stream()
                        : c10::cuda::getStreamFromPool(false, device).stream();

  std::vector<void*> ptr(t.allocs, nullptr);
  std::vector<std::uint32_t> all_ns, alloc_ns, free_ns;
  for (std::size_t pass = 1; pass <= passes; ++pass) {
    const bool measured = pass == passes;
    for (const tr::event& e : t.events) {
      if (e.op == tr::op_kind::alloc) {
        const cudaStream_t st = streams.at(e.stream);
        const auto t0 = clock_type::now();
        void* p = alloc_api::raw_alloc_with_stream(e.size, st);
        const auto t1 = clock_type::now();
        ptr[static_cast<std::size_t>(e.id)] = p;
        if (measured) {
          alloc_ns.push_back(elapsed_ns(t0, t1));
          all_ns.push_back(alloc_ns.back());
        }
      } else if (e.op == tr::op_kind::free) {
        void*& p = ptr[static_cast<std::size_t>(e.id)];
        const auto t0 = clock_type::now();
        alloc_api::raw_delete(p);
        const auto t1 = clock_type::now();
        p = nullptr;
        if (measured) {
          free_ns.push_back(elapsed_ns(t0, t1));
          all_ns.push_back(free_ns.back());
        }
      }
    }
    for (void*& p : ptr)  // the trace's leftovers, as umem's replay does
      if (p) {
        alloc_api::raw_delete(p);
        p = nullptr;
      }
    c10::cuda::device_synchronize();
  }
  const auto stats = alloc_api::getDeviceStats(device);
  // Index 0 of each stat array is StatType::AGGREGATE (all pools).
  r.peak_allocated = static_cast<std::uint64_t>(stats.allocated_bytes[0].peak);
  r.peak_reserved = static_cast<std::uint64_t>(stats.reserved_bytes[0].peak);
  r.upstream_allocs = static_cast<std::uint64_t>(stats.num_device_alloc);
  r.upstream_frees = static_cast<std::uint64_t>(stats.num_device_free);
  r.all = tr::summarize(all_ns);
  r.alloc = tr::summarize(alloc_ns);
  r.free = tr::summarize(free_ns);
  r.wall_seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t passes = 2;
  std::string label = "cca";
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--passes" && i + 1 < argc)
      passes = std::strtoul(argv[++i], nullptr, 10);
    else if (a == "--label" && i + 1 < argc)
      label = argv[++i];
    else
      args.push_back(a);
  }
  if (args.empty() || args.size() > 2 || passes == 0) {
    std::fprintf(stderr, "usage: cca-trace-replay [--passes N] [--label NAME] TRACE.csv "
                         "[DISPLAY_NAME]\n");
    return 2;
  }
  try {
    std::ifstream in(args[0]);
    if (!in) {
      std::fprintf(stderr, "cca-trace-replay: cannot open %s\n", args[0].c_str());
      return 2;
    }
    const tr::trace t = tr::parse_trace(in, args[0]);
    alloc_api::init(c10::cuda::device_count());
    const tr::replay_report r = replay(t, passes, label, args.size() > 1 ? args[1] : args[0]);
    std::fputs(tr::format_text(r).c_str(), stdout);
    std::fputs(tr::format_result_line(r).c_str(), stdout);
  } catch (const umem::error& e) {
    std::fprintf(stderr, "cca-trace-replay: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cca-trace-replay: %s\n", e.what());
    return 2;
  }
  return 0;
}
