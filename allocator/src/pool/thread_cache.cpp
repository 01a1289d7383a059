#include "umem/allocator/detail/pool/thread_cache.hpp"

#include <thread>

namespace umem::alloc {

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

std::int64_t signed_size(std::size_t n) { return static_cast<std::int64_t>(n); }

}  // namespace

thread_cache_totals& thread_cache_totals::operator+=(const thread_cache_totals& o) {
  for (std::size_t c = 0; c < classes.size(); ++c) {
    per_class& a = classes[c];
    const per_class& b = o.classes[c];
    a.alloc_bytes += b.alloc_bytes;
    a.alloc_count += b.alloc_count;
    a.alloc_requested += b.alloc_requested;
    a.free_bytes += b.free_bytes;
    a.free_count += b.free_count;
    a.free_requested += b.free_requested;
    a.held_bytes += b.held_bytes;
    a.held_count += b.held_count;
  }
  hits += o.hits;
  return *this;
}

thread_cache::thread_cache(std::size_t capacity_bytes, std::size_t small_max)
    : small_max_(small_max), room_(static_cast<std::int64_t>(capacity_bytes)) {
  for (std::size_t i = big_bin_first; i < bin_count; ++i) bins_[i].limit = slots_of(i) - 1;
}

void thread_cache::steal(std::vector<block*>& out) {
  // After request_steal() and the heavy fence the owner either saw the request (and keeps out of
  // the bins) or is busy now and will finish its operation first.
  while (busy_.load(std::memory_order_acquire)) std::this_thread::yield();
  auto take = [&](std::atomic<block*>& slot) {
    block* b = slot.load(std::memory_order_acquire);
    if (b == nullptr) return;
    slot.store(nullptr, relaxed);
    stolen_counters& s = stolen_[class_of(b->size)];
    s.bytes.store(s.bytes.load(relaxed) + signed_size(b->size), relaxed);
    s.count.store(s.count.load(relaxed) + 1, relaxed);
    stolen_bytes_.store(stolen_bytes_.load(relaxed) + signed_size(b->size), relaxed);
    out.push_back(b);
  };
  for (bin& bn : bins_) {
    take(bn.top);  // the whole bin: the owner reads a null top as "all gone"
    for (std::atomic<block*>& slot : bn.slots) take(slot);
  }
  steal_pending_.store(false, std::memory_order_release);
}

std::size_t thread_cache::return_big(std::span<block*, big_bins> out) {
  if (big_filled_ == 0) return 0;
  const owner_section section(*this);
  if (!section.ok()) return 0;  // the stealer takes them
  std::size_t n = 0;
  for (std::uint64_t filled = big_filled_; filled != 0; filled &= filled - 1) {
    bin& bn = bins_[big_bin_first + static_cast<std::size_t>(std::countr_zero(filled))];
    if (block* b = bn.top.load(std::memory_order_acquire)) {  // big bins hold the top alone
      bn.top.store(nullptr, relaxed);
      stolen_counters& r = returned_[class_of(b->size)];
      r.bytes.store(r.bytes.load(relaxed) + signed_size(b->size), relaxed);
      r.count.store(r.count.load(relaxed) + 1, relaxed);
      room_ += signed_size(b->size);
      out[n++] = b;
    }
    bn.top_size = 0;
    bn.below = 0;
  }
  big_filled_ = 0;
  return n;
}

thread_cache_totals thread_cache::totals() const {
  thread_cache_totals t;
  for (std::size_t c = 0; c < 2; ++c) {
    const counters& k = counters_[c];
    thread_cache_totals::per_class& o = t.classes[c];
    o.alloc_bytes = k.alloc_bytes.load(relaxed);
    o.alloc_count = k.alloc_count.load(relaxed);
    o.alloc_requested = k.alloc_requested.load(relaxed);
    o.free_bytes = k.free_bytes.load(relaxed);
    o.free_count = k.free_count.load(relaxed);
    o.free_requested = k.free_requested.load(relaxed);
    o.held_bytes = o.free_bytes - o.alloc_bytes - stolen_[c].bytes.load(relaxed) -
                   returned_[c].bytes.load(relaxed);
    o.held_count = o.free_count - o.alloc_count - stolen_[c].count.load(relaxed) -
                   returned_[c].count.load(relaxed);
    t.hits += o.alloc_count;
  }
  return t;
}

}  // namespace umem::alloc
