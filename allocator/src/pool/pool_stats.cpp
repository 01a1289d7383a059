#include "umem/allocator/pool_stats.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "umem/allocator/placement.hpp"
#include "umem/core/detail/text.hpp"

namespace umem::alloc {

namespace {

constexpr std::array<const char*, metric_count> metric_names{
    "allocated_bytes", "reserved_bytes", "requested_bytes", "allocation", "segment"};
constexpr std::array<const char*, size_class_count> size_class_names{"all", "small_pool",
                                                                     "large_pool"};
constexpr std::array<const char*, counter_count> counter_names{
    "num_alloc_retries", "num_ooms", "upstream_allocs", "upstream_frees", "cache_hits", "spills"};

template <class F>
void for_each_gauge(F&& f) {
  for (std::size_t m = 0; m < metric_count; ++m)
    for (std::size_t c = 0; c < size_class_count; ++c)
      f(static_cast<metric>(m), static_cast<size_class>(c));
}

using umem::detail::hex;

}  // namespace

const char* to_string(metric m) { return metric_names[static_cast<std::size_t>(m)]; }
const char* to_string(size_class c) { return size_class_names[static_cast<std::size_t>(c)]; }
const char* to_string(counter c) { return counter_names[static_cast<std::size_t>(c)]; }

void pool_stats::reset_peak() {
  for (auto& per_metric : gauges)
    for (stat& s : per_metric) s.peak = s.current;
}

global_peak_tracker::cell& global_peak_tracker::at(metric m, size_class c) noexcept {
  return cells_[static_cast<std::size_t>(m)][static_cast<std::size_t>(c)];
}

const global_peak_tracker::cell& global_peak_tracker::at(metric m, size_class c) const noexcept {
  return cells_[static_cast<std::size_t>(m)][static_cast<std::size_t>(c)];
}

void global_peak_tracker::add(metric m, size_class c, std::int64_t delta) noexcept {
  cell& x = at(m, c);
  const std::int64_t now = x.current.fetch_add(delta, std::memory_order_relaxed) + delta;
  std::int64_t seen = x.peak.load(std::memory_order_relaxed);
  while (now > seen && !x.peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

std::int64_t global_peak_tracker::current(metric m, size_class c) const noexcept {
  return at(m, c).current.load(std::memory_order_relaxed);
}

std::int64_t global_peak_tracker::peak(metric m, size_class c) const noexcept {
  return at(m, c).peak.load(std::memory_order_relaxed);
}

void global_peak_tracker::reset_peak() noexcept {
  for_each_gauge([this](metric m, size_class c) {
    cell& x = at(m, c);
    x.peak.store(x.current.load(std::memory_order_relaxed), std::memory_order_relaxed);
  });
}

void global_peak_tracker::absorb(const pool_stats& s) noexcept {
  for_each_gauge([&](metric m, size_class c) {
    cell& x = at(m, c);
    add(m, c, s(m, c).current);
    std::int64_t seen = x.peak.load(std::memory_order_relaxed);
    const std::int64_t p = s(m, c).peak;
    while (p > seen && !x.peak.compare_exchange_weak(seen, p, std::memory_order_relaxed)) {
    }
  });
}

pool_stats merge(std::span<const pool_stats> pools, const global_peak_tracker& peaks) {
  pool_stats total;
  for (const pool_stats& p : pools) {
    for_each_gauge([&](metric m, size_class c) {
      total(m, c).current += p(m, c).current;
      total(m, c).allocated += p(m, c).allocated;
      total(m, c).freed += p(m, c).freed;
    });
    for (std::size_t i = 0; i < counter_count; ++i) total.counters[i] += p.counters[i];
  }
  for_each_gauge([&](metric m, size_class c) { total(m, c).peak = peaks.peak(m, c); });
  return total;
}

std::map<std::string, std::int64_t> to_flat_map(const pool_stats& s,
                                                const std::string& pool_name) {
  const bool all = pool_name == "all";
  std::map<std::string, std::int64_t> out;
  for_each_gauge([&](metric m, size_class c) {
    std::string pool = c == size_class::all ? pool_name
                       : all               ? std::string(to_string(c))
                                           : pool_name + "." + to_string(c);
    const std::string prefix = std::string(to_string(m)) + "." + pool + ".";
    const stat& v = s(m, c);
    out[prefix + "current"] = v.current;
    out[prefix + "peak"] = v.peak;
    out[prefix + "allocated"] = v.allocated;
    out[prefix + "freed"] = v.freed;
  });
  for (std::size_t i = 0; i < counter_count; ++i) {
    const std::string name = counter_names[i];
    out[all ? name : name + "." + pool_name] = s.counters[i];
  }
  return out;
}

std::string to_json(const pool_stats& s, const std::string& pool_name) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : to_flat_map(s, pool_name)) j[key] = value;
  return j.dump();
}

std::string to_json(const pool_snapshot& s) {
  nlohmann::json segments = nlohmann::json::array();
  for (const segment_snapshot& seg : s.segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const block_snapshot& b : seg.blocks)
      blocks.push_back({{"offset", b.offset},
                        {"size", b.size},
                        {"requested", b.requested},
                        {"state", b.allocated       ? "allocated"
                                  : b.thread_cached ? "thread_cached"
                                                    : "free"}});
    segments.push_back({{"address", hex(seg.base)},
                        {"size", seg.size},
                        {"binding",
                         {{"mode", to_string(seg.binding.mode)},
                          {"nodes", seg.binding.nodes}}},
                        {"coherence", to_string(seg.kind)},
                        {"huge_pages", seg.huge_pages},
                        {"pool", to_string(seg.pool)},
                        {"blocks", std::move(blocks)}});
  }
  return nlohmann::json{{"segments", std::move(segments)}}.dump();
}

}  // namespace umem::alloc
