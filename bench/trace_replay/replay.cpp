#include "replay.hpp"

#include <chrono>
#include <filesystem>
#include <limits>

#include "integrity_checker.hpp"
#include "stream_ordered_pool.hpp"
#include "stream_safety_checker.hpp"

namespace umem::trace_replay {

namespace {

using clock_type = std::chrono::steady_clock;

std::uint32_t elapsed_ns(clock_type::time_point a, clock_type::time_point b) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
  return ns > std::numeric_limits<std::uint32_t>::max()
             ? std::numeric_limits<std::uint32_t>::max()
             : static_cast<std::uint32_t>(ns);
}

// Power-of-two buckets from 512 B to 4 GiB.
std::vector<free_bucket> free_space(const alloc::pool_snapshot& snap) {
  std::vector<free_bucket> out;
  for (std::uint64_t lower = 0, upper = 512; lower < (std::uint64_t{4} << 30);
       lower = upper, upper *= 2)
    out.push_back(free_bucket{lower, upper, 0, 0, 0, 0});
  out.back().upper = std::numeric_limits<std::uint64_t>::max();
  for (const auto& seg : snap.segments)
    for (const auto& b : seg.blocks) {
      if (b.allocated) continue;
      auto it = out.begin();
      while (it + 1 != out.end() && b.size >= it->upper) ++it;
      if (seg.pool == alloc::size_class::small_pool) {
        ++it->small_blocks;
        it->small_bytes += b.size;
      } else {
        ++it->large_blocks;
        it->large_bytes += b.size;
      }
    }
  return out;
}

}  // namespace

replay_result replay(const trace& t, alloc::upstream_source& upstream,
                     const replay_options& options) {
  const auto started = clock_type::now();
  replay_result result;
  replay_report& r = result.report;
  r.allocator = "umem";
  describe_trace(r, t, std::filesystem::path(t.source).filename().string());
  r.upstream = upstream.describe();
  r.passes = options.passes;

  alloc::caching_pool pool(upstream, alloc::node_binding{alloc::bind_mode::bind, {0}},
                           coherence::fine, options.pool);
  stream_ordered_pool layer(pool, options.stream_ordering && t.streams.size() > 1);
  integrity_checker integrity(t.allocs, options.check_stride);
  stream_safety_checker safety;
  result.addresses.assign(t.allocs, 0);
  std::vector<bool> live(t.allocs, false);
  std::vector<std::uint32_t> all_ns, alloc_ns, free_ns;
  std::int64_t reserved_seen = 0;

  auto free_block = [&](std::int64_t id, std::uint32_t stream, std::uint32_t line,
                        bool measured) {
    void* p = integrity.on_free(id, line);
    const std::size_t size = pool.block_size(p);
    const auto t0 = clock_type::now();
    layer.deallocate(p, stream);
    const auto t1 = clock_type::now();
    safety.on_free(p, size, stream);
    live[static_cast<std::size_t>(id)] = false;
    if (measured) {
      free_ns.push_back(elapsed_ns(t0, t1));
      all_ns.push_back(free_ns.back());
    }
  };

  std::vector<std::uint32_t> stream_of(t.allocs, 0);
  for (std::size_t pass = 1; pass <= options.passes; ++pass) {
    const bool measured = pass == options.passes;
    if (measured) {
      all_ns.reserve(t.allocs + t.frees);
      alloc_ns.reserve(t.allocs);
      free_ns.reserve(t.frees);
    }
    integrity.begin_pass(static_cast<std::uint32_t>(pass));
    for (const event& e : t.events) {
      switch (e.op) {
        case op_kind::alloc: {
          const auto t0 = clock_type::now();
          void* p = layer.allocate(e.size, e.stream);
          const auto t1 = clock_type::now();
          if (measured) {
            alloc_ns.push_back(elapsed_ns(t0, t1));
            all_ns.push_back(alloc_ns.back());
          }
          const auto id = static_cast<std::size_t>(e.id);
          result.addresses[id] = reinterpret_cast<std::uintptr_t>(p);
          live[id] = true;
          stream_of[id] = e.stream;
          integrity.on_alloc(e.id, p, e.size, e.line);
          safety.on_alloc(p, pool.block_size(p), e.stream);
          if (options.free_histogram) {
            const auto reserved =
                pool.stats()(alloc::metric::reserved_bytes, alloc::size_class::all).current;
            if (reserved > reserved_seen) {
              reserved_seen = reserved;
              r.free_at_peak = free_space(pool.snapshot());
              r.allocated_at_peak_reserved = static_cast<std::uint64_t>(
                  pool.stats()(alloc::metric::allocated_bytes, alloc::size_class::all).current);
            }
          }
          break;
        }
        case op_kind::free:
          free_block(e.id, e.stream, e.line, measured);
          break;
        case op_kind::stream_sync:
          layer.synchronize(e.stream);
          safety.on_sync(e.stream);
          break;
        case op_kind::segment_alloc:
        case op_kind::segment_free:
          break;
      }
    }
    // End of the pass: the trace's leftovers are freed, the device synchronizes.
    for (std::size_t id = 0; id < t.allocs; ++id)
      if (live[id])
        free_block(static_cast<std::int64_t>(id), stream_of[id], 0, false);
    layer.synchronize_all();
    safety.on_sync_all();
  }

  const alloc::pool_stats s = pool.stats();
  r.peak_allocated = static_cast<std::uint64_t>(
      s(alloc::metric::allocated_bytes, alloc::size_class::all).peak);
  r.peak_reserved =
      static_cast<std::uint64_t>(s(alloc::metric::reserved_bytes, alloc::size_class::all).peak);
  r.upstream_allocs = static_cast<std::uint64_t>(s[alloc::counter::upstream_allocs]);
  r.upstream_frees = static_cast<std::uint64_t>(s[alloc::counter::upstream_frees]);
  r.all = summarize(all_ns);
  r.alloc = summarize(alloc_ns);
  r.free = summarize(free_ns);
  r.integrity_failures = static_cast<std::int64_t>(integrity.failures());
  r.blocks_checked = integrity.blocks_checked();
  r.check_stride = integrity.stride();
  r.failure_messages = integrity.messages();
  r.stream_violations = static_cast<std::int64_t>(safety.violations());
  result.pending_reuses = layer.pending_reuses();
  r.wall_seconds = std::chrono::duration<double>(clock_type::now() - started).count();
  return result;
}

}  // namespace umem::trace_replay
