#include "umem/allocator/detail/pool/thread_cache.hpp"

#include <new>
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
  for (auto& base : slab_bases_) base.store(no_slab, std::memory_order_relaxed);
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


bool thread_cache::refill(std::size_t k) {
  const owner_section section(*this);
  if (!section.ok()) return false;
  take_queued();
  if (slab* a = active_[k]; a != nullptr && (a->free_count != 0 || a->collect_remote() != 0))
    return true;
  while (slab* s = partial_[k]) {
    partial_[k] = s->next_partial;
    s->in_partial = false;
    s->collect_remote();
    if (s->free_count != 0) {
      active_[k] = s;
      return true;
    }
  }
  return false;
}

bool thread_cache::adopt(slab* s) {
  const owner_section section(*this);
  if (!section.ok()) return false;
  try {
    slabs_.push_back(s);
  } catch (const std::bad_alloc&) {
    return false;  // the caller gives the slab back
  }
  active_[s->size_class] = s;  // the one it replaces has no free object (refill said so)
  const std::size_t slot = slab_slot_of(s);
  slab_bases_[slot].store(s->base, std::memory_order_relaxed);
  slab_of_slot_[slot].store(s, std::memory_order_relaxed);
  return true;
}

void thread_cache::queue_remote(slab* s) {
  // Acquire, with take_queued's release: the owner's read of next_queued happens before the
  // write below. Relaxed, the owner's clearing of `queued` may become visible before that read on
  // weakly ordered CPUs (Arm), and the owner would follow the link written here (ThreadSanitizer
  // reported it in slab_test's stress with frees on other threads).
  if (s->queued.exchange(true, std::memory_order_acquire)) return;
  slab* head = queued_.load(std::memory_order_relaxed);
  do {
    s->next_queued = head;
  } while (!queued_.compare_exchange_weak(head, s, std::memory_order_release,
                                          std::memory_order_relaxed));
}

void thread_cache::take_queued() {
  for (slab* s = queued_.exchange(nullptr, std::memory_order_acquire); s != nullptr;) {
    slab* next = s->next_queued;
    s->queued.store(false, std::memory_order_release);  // after reading next_queued
    if (s->collect_remote() != 0 && !s->in_partial && s != active_[s->size_class] &&
        s->free_count != 0)
      list_partial(s);
    s = next;
  }
}

void thread_cache::steal_slabs(std::vector<slab*>& released, std::vector<slab*>* orphaned) {
  take_queued();
  partial_.fill(nullptr);
  std::vector<slab*> kept;
  for (slab* s : slabs_) {
    s->collect_remote();
    s->in_partial = false;
    if (s->free_count == s->objects) {
      released.push_back(s);
    } else if (orphaned != nullptr) {
      orphaned->push_back(s);
    } else {
      kept.push_back(s);
      if (s->free_count != 0 && s != active_[s->size_class]) list_partial(s);
      continue;
    }
    if (active_[s->size_class] == s) active_[s->size_class] = nullptr;
    const std::size_t slot = slab_slot_of(s);
    if (slab_of_slot_[slot].load(std::memory_order_relaxed) == s) {
      slab_bases_[slot].store(no_slab, std::memory_order_relaxed);
      slab_of_slot_[slot].store(nullptr, std::memory_order_relaxed);
    }
  }
  slabs_ = std::move(kept);
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
  // Slab objects (Note [Slabs]) are small; their bins' held figures do not apply.
  thread_cache_totals::per_class& small = t.classes[0];
  for (std::size_t k = 0; k < slab_classes; ++k) {
    const slab_counters& c = slab_counters_[k];
    const std::int64_t size = static_cast<std::int64_t>((k + 1) * 256);
    const std::int64_t allocs = c.alloc_count.load(relaxed);
    const std::int64_t frees = c.free_count.load(relaxed);
    small.alloc_bytes += allocs * size;
    small.alloc_count += allocs;
    small.alloc_requested += c.alloc_requested.load(relaxed);
    small.free_bytes += frees * size;
    small.free_count += frees;
    small.free_requested += c.free_requested.load(relaxed);
    t.hits += allocs;
  }
  return t;
}

}  // namespace umem::alloc
