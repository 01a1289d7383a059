#include "umem/torch_bridge/host_statistics.hpp"

#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <vector>

#include "umem/allocator/fork_safety.hpp"
#include "umem/core/detail/single_writer.hpp"

namespace umem::torch_bridge {
namespace {

// What is counted, per side (0: small_pool, 1: large_pool): cell(gauge, side).
enum gauge : std::size_t { bytes_gauge, requested_gauge, count_gauge, gauge_count };
constexpr std::size_t sides = 2;
constexpr std::size_t cells = gauge_count * sides;
constexpr std::size_t cell(std::size_t g, std::size_t side) { return g * sides + side; }

// How far a record's balance may drift from what it pushed to the shared totals (Note [Host
// statistics]): the error of a peak, per other thread.
constexpr std::int64_t flush_bytes = std::int64_t{4} << 20;
constexpr std::int64_t flush_count = 256;
constexpr std::int64_t flush_limit(std::size_t g) {
  return g == count_gauge ? flush_count : flush_bytes;
}
// An allocation's own block, up to this size, may stay unpushed beyond the limits: a thread that
// allocates and frees one large block at a time (a 16 MiB activation in a loop) then pushes
// nothing, as its free cancels the allocation, instead of two pushes to the cache line every
// other thread's pushes and peak checks use (Note [Host statistics]).
constexpr std::int64_t carried_block_limit = std::int64_t{64} << 20;

using counters = std::array<std::atomic<std::int64_t>, cells>;

// One thread's counts. `in` and `out` are written by their thread only (Note [Single-writer
// counters] in single_writer.hpp) and read by anyone; the rest is the owner's alone.
struct alignas(64) thread_record {
  counters in{}, out{};
  // in - out not yet added to shared::current, kept beside them so that a check of it loads one
  // word, not three.
  std::array<std::int64_t, cells> unpushed{};
  // What the peaks left above the shared totals when this thread last looked (Note [Host
  // statistics]): its unpushed balance may grow this far before a peak needs raising, while
  // shared::epoch is still `epoch_seen`.
  std::uint64_t epoch_seen = 0;
  std::array<std::int64_t, cells> room_side{};        // peak of the cell's side - current
  std::array<std::int64_t, gauge_count> room_total{};  // peak of both sides - current of both
};

void raise(std::atomic<std::int64_t>& peak, std::int64_t v) {
  std::int64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

struct host_statistics::shared {
  std::mutex mutex;  // guards records, idle and the bases; taken on no allocation but a thread's first
  std::shared_ptr<void> fork = alloc::lock_around_fork(mutex, alloc::fork_rank::bridge);
  std::deque<thread_record> records;  // stable addresses
  std::vector<thread_record*> idle;   // of threads that ended
  counters current{};                 // pushed balances
  // Moves on every push and reset of the peaks (never 0, which no record has seen): a record's
  // rooms hold while it has not moved.
  std::atomic<std::uint64_t> epoch{1};
  std::array<std::atomic<std::int64_t>, gauge_count * alloc::size_class_count> peak{};
  std::array<std::int64_t, cells> base_in{}, base_out{};  // reset_accumulated
  std::atomic<std::int64_t> ooms{0}, retries{0};

  void push(thread_record& r) {
    for (std::size_t c = 0; c < cells; ++c) {
      const std::int64_t n = r.unpushed[c];
      if (n == 0) continue;
      current[c].fetch_add(n, std::memory_order_relaxed);
      r.unpushed[c] = 0;
    }
    epoch.fetch_add(1, std::memory_order_release);
  }
  // Raises every peak to what `r`'s thread sees (the shared totals plus its unpushed balance) and
  // measures its rooms anew.
  [[gnu::noinline]] void raise_peaks(thread_record& r) {
    r.epoch_seen = epoch.load(std::memory_order_acquire);  // before the totals it goes with
    for (std::size_t g = 0; g < gauge_count; ++g) {
      std::int64_t shared_total = 0, total = 0;
      for (std::size_t side = 0; side < sides; ++side) {
        const std::size_t c = cell(g, side);
        const std::int64_t pushed_here = current[c].load(std::memory_order_relaxed);
        const std::int64_t here = pushed_here + r.unpushed[c];  // what this thread sees
        std::atomic<std::int64_t>& p = peak[g * alloc::size_class_count + 1 + side];
        raise(p, here);
        r.room_side[c] = p.load(std::memory_order_relaxed) - pushed_here;
        shared_total += pushed_here;
        total += here;
      }
      std::atomic<std::int64_t>& p = peak[g * alloc::size_class_count];
      raise(p, total);
      r.room_total[g] = p.load(std::memory_order_relaxed) - shared_total;
    }
  }
  // Sums of every record; mutex held.
  std::array<std::int64_t, cells> sum(const counters thread_record::*which) const {
    std::array<std::int64_t, cells> s{};
    for (const thread_record& r : records)
      for (std::size_t c = 0; c < cells; ++c) s[c] += (r.*which)[c].load(std::memory_order_relaxed);
    return s;
  }
};

namespace {

// The calling thread's record and the host_statistics it belongs to, for every call's lookup:
// trivially destructible and initial-exec (as t_last_cache in thread_cache_registry.hpp), so
// reading it costs no TLS wrapper or __tls_get_addr in this shared library. t_slot below owns the
// record and is touched only on a thread's first call, when it switches and when it ends.
struct last_record {
  const host_statistics::shared* owner = nullptr;
  thread_record* record = nullptr;
};
[[gnu::tls_model("initial-exec")]] thread_local last_record t_last;

// The calling thread's record in one host_statistics (a thread counts in one at a time: the
// process has one bridge; tests switch between several).
struct thread_slot {
  std::shared_ptr<host_statistics::shared> owner;
  thread_record* record = nullptr;

  void release() {
    if (!owner) return;
    t_last = {};
    {
      const std::lock_guard lock(owner->mutex);
      owner->push(*record);
      owner->idle.push_back(record);
    }
    owner.reset();
    record = nullptr;
  }
  ~thread_slot() { release(); }
};

thread_local thread_slot t_slot;

[[gnu::noinline]] thread_record& adopt_record(const std::shared_ptr<host_statistics::shared>& s) {
  t_slot.release();
  const std::lock_guard lock(s->mutex);
  thread_record* r = nullptr;
  if (!s->idle.empty()) {
    r = s->idle.back();
    s->idle.pop_back();
  } else {
    r = &s->records.emplace_back();
  }
  t_slot.owner = s;
  t_slot.record = r;
  t_last = {s.get(), r};
  return *r;
}

thread_record& record_in(const std::shared_ptr<host_statistics::shared>& s) {
  if (t_last.owner == s.get()) return *t_last.record;
  return adopt_record(s);
}

}  // namespace

host_statistics::change host_statistics::change_of(std::size_t reported,
                                                   std::size_t requested) const {
  static_assert(std::tuple_size_v<decltype(change::amounts)> == gauge_count);
  return {reported <= small_limit_ ? std::size_t{0} : std::size_t{1},
          {static_cast<std::int64_t>(reported), static_cast<std::int64_t>(requested), 1}};
}

host_statistics::host_statistics(std::size_t small_limit)
    : small_limit_(small_limit), shared_(std::make_shared<shared>()) {}

host_statistics::~host_statistics() = default;

void host_statistics::allocated(std::size_t reported, std::size_t requested) {
  thread_record& r = record_in(shared_);
  shared& s = *shared_;
  const auto [side, n] = change_of(reported, requested);
  const bool carried = n[bytes_gauge] <= carried_block_limit;
  bool higher = r.epoch_seen != s.epoch.load(std::memory_order_acquire);
  bool push = false;
#pragma GCC unroll 3
  for (std::size_t g = 0; g < gauge_count; ++g) {
    const std::size_t mine = cell(g, side), other = cell(g, 1 - side);
    umem::detail::single_writer_add(r.in[mine], n[g]);
    const std::int64_t unpushed = r.unpushed[mine] += n[g];
    higher = higher || unpushed > r.room_side[mine] ||
             unpushed + r.unpushed[other] > r.room_total[g];
    push = push || std::llabs(unpushed - (carried ? n[g] : 0)) > flush_limit(g);
  }
  if (higher) s.raise_peaks(r);
  if (push) s.push(r);
}

void host_statistics::freed(std::size_t reported, std::size_t requested) {
  thread_record& r = record_in(shared_);
  const auto [side, n] = change_of(reported, requested);
  bool push = false;
#pragma GCC unroll 3
  for (std::size_t g = 0; g < gauge_count; ++g) {
    const std::size_t c = cell(g, side);
    umem::detail::single_writer_add(r.out[c], n[g]);
    push = push || std::llabs(r.unpushed[c] -= n[g]) > flush_limit(g);
  }
  if (push) shared_->push(r);
}

void host_statistics::out_of_memory() noexcept {
  shared_->ooms.fetch_add(1, std::memory_order_relaxed);
}

void host_statistics::retried(std::int64_t n) noexcept {
  shared_->retries.fetch_add(n, std::memory_order_relaxed);
}

host_statistics::snapshot host_statistics::read() const {
  shared& s = *shared_;
  const std::lock_guard lock(s.mutex);
  const auto in = s.sum(&thread_record::in), out = s.sum(&thread_record::out);
  snapshot out_stats;
  by_class* to[gauge_count] = {&out_stats.allocated_bytes, &out_stats.requested_bytes,
                               &out_stats.allocation};
  for (std::size_t g = 0; g < gauge_count; ++g) {
    by_class& b = *to[g];
    for (std::size_t side = 0; side < sides; ++side) {
      const std::size_t c = cell(g, side);
      alloc::stat& x = b[1 + side];
      x.current = in[c] - out[c];
      x.allocated = in[c] - s.base_in[c];
      x.freed = out[c] - s.base_out[c];
      b[0].current += x.current;
      b[0].allocated += x.allocated;
      b[0].freed += x.freed;
    }
    for (std::size_t k = 0; k < alloc::size_class_count; ++k)
      b[k].peak = std::max(s.peak[g * alloc::size_class_count + k].load(std::memory_order_relaxed),
                           b[k].current);
  }
  out_stats.num_ooms = s.ooms.load(std::memory_order_relaxed);
  out_stats.num_alloc_retries = s.retries.load(std::memory_order_relaxed);
  return out_stats;
}

void host_statistics::reset_peaks() {
  const snapshot now = read();
  const by_class* from[gauge_count] = {&now.allocated_bytes, &now.requested_bytes, &now.allocation};
  for (std::size_t g = 0; g < gauge_count; ++g)
    for (std::size_t k = 0; k < alloc::size_class_count; ++k)
      shared_->peak[g * alloc::size_class_count + k].store((*from[g])[k].current,
                                                           std::memory_order_relaxed);
  shared_->epoch.fetch_add(1, std::memory_order_release);  // the records' rooms were measured
                                                           // against the old peaks
}

void host_statistics::reset_accumulated() {
  shared& s = *shared_;
  const std::lock_guard lock(s.mutex);
  s.base_in = s.sum(&thread_record::in);
  s.base_out = s.sum(&thread_record::out);
  s.ooms.store(0, std::memory_order_relaxed);
  s.retries.store(0, std::memory_order_relaxed);
}

}  // namespace umem::torch_bridge
