#include "umem/allocator/detail/pool/caching_pool.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "umem/allocator/placement.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

namespace umem::alloc {

namespace {

constexpr std::size_t size_max = std::numeric_limits<std::size_t>::max();

std::int64_t signed_size(std::size_t n) { return static_cast<std::int64_t>(n); }

std::uintptr_t address_of(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

const void* pointer_of(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

// Note [Slab segments]: slabs need thread caches, the pool's 256-byte alignment (an object's
// granule), small objects in the small class, and slab segments made of whole slabs.
std::size_t slab_max_for(const pool_config& c) {
  const bool possible = c.thread_cache_bytes != 0 && c.alignment == 256 &&
                        c.small_max >= thread_cache::slab_max &&
                        c.small_segment_size % slab::bytes == 0;
  return possible ? thread_cache::slab_max : 0;
}

const pool_config& validated(const pool_config& c) {
  auto bad = [](const std::string& what) {
    throw_error(errc::invalid_argument, "caching_pool: invalid pool_config: " + what);
  };
  if (c.alignment == 0 || (c.alignment & (c.alignment - 1)) != 0)
    bad("alignment " + std::to_string(c.alignment) + " is not a power of two");
  auto multiple = [&](std::size_t v, const char* name) {
    if (v == 0 || v % c.alignment != 0)
      bad(std::string(name) + " = " + std::to_string(v) + " must be a non-zero multiple of " +
          "the alignment (" + std::to_string(c.alignment) + ")");
  };
  multiple(c.small_max, "small_max");
  multiple(c.small_segment_size, "small_segment_size");
  multiple(c.large_segment_rounding, "large_segment_rounding");
  if (c.small_grow_max > c.small_max || c.small_grow_max % c.alignment != 0)
    bad("small_grow_max = " + std::to_string(c.small_grow_max) +
        " must be a multiple of the alignment no larger than small_max (" +
        std::to_string(c.small_max) + "), or 0");
  // Thread caches count a block as small or large by its size (thread_cache.hpp), which a medium
  // block in the large pool would break (Note [Medium blocks]).
  if (c.small_grow_max != 0 && c.small_grow_max < c.small_max && c.thread_cache_bytes != 0)
    bad("small_grow_max = " + std::to_string(c.small_grow_max) + " below small_max (" +
        std::to_string(c.small_max) + ") needs thread caches off (thread_cache_bytes = 0, not " +
        std::to_string(c.thread_cache_bytes) + ")");
  if (c.small_segment_size < c.small_max)
    bad("small_segment_size (" + std::to_string(c.small_segment_size) +
        ") is smaller than small_max (" + std::to_string(c.small_max) + ")");
  if (c.expandable_segments) multiple(c.expandable_reserve_bytes, "expandable_reserve_bytes");
  return c;
}

}  // namespace

caching_pool::caching_pool(upstream_source& upstream, node_binding binding, coherence kind,
                           pool_config config, global_peak_tracker* global)
    : upstream_(upstream),
      binding_(std::move(binding)),
      kind_(kind),
      config_(validated(config)),
      global_(global),
      small_(config_.alignment),
      large_(small_grow_max() + config_.alignment),  // Note [Medium blocks]
      slab_max_(slab_max_for(config_)),
      slab_chunks_(slab::bytes),
      threads_(std::make_unique<thread_cache_registry>(
          config_.thread_cache_bytes, config_.small_max,
          [this](thread_cache& cache, std::vector<block*>& blocks, bool exiting) {
            return take_back(cache, blocks, exiting);
          })),
      cache_serial_(threads_->serial()) {}

caching_pool::~caching_pool() {
  threads_.reset();
  std::size_t held = 0;
  live_.for_each([&](std::uintptr_t, const live_block& l) {
    held += ticket::state_of(l.b->ticket.load(std::memory_order_relaxed)) == ticket::live;
  });
  slabs_by_granule_.for_each([&](std::uintptr_t, slab* const& sl) {
    for (const auto& r : sl->requested) held += r.load(std::memory_order_relaxed) != 0;
  });
  if (held != 0)
    log().warn("umem pool {}: destroyed with {} blocks still allocated; their memory is returned "
               "to the upstream now",
               describe(), held);
  for (const auto& [base, rec] : segments_) upstream_.deallocate(rec.seg);
  // Keep the global tracker equal to the sum of the pools that still exist.
  if (global_)
    for (std::size_t m = 0; m < metric_count; ++m)
      for (std::size_t c = 0; c < size_class_count; ++c)
        global_->add(static_cast<metric>(m), static_cast<size_class>(c),
                     -stats_.gauges[m][c].current);
}

std::string caching_pool::describe() const {
  std::ostringstream s;
  s << (binding_.nodes.size() == 1 ? "node " : "nodes ");
  for (std::size_t i = 0; i < binding_.nodes.size(); ++i) s << (i ? "," : "") << binding_.nodes[i];
  if (binding_.nodes.empty()) s << "(none)";
  s << " (" << to_string(binding_.mode) << "), " << to_string(kind_);
  return s.str();
}

void caching_pool::add_to_stats(metric m, size_class c, std::int64_t delta) {
  stat& total = stats_(m, size_class::all);
  stat& own = stats_(m, c);
  if (delta >= 0) {
    total.increase(delta);
    own.increase(delta);
  } else {
    total.decrease(-delta);
    own.decrease(-delta);
  }
  if (global_) {
    global_->add(m, size_class::all, delta);
    global_->add(m, c, delta);
  }
}

std::size_t caching_pool::reserved_now() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::size_t>(stats_(metric::reserved_bytes, size_class::all).current);
}

std::size_t caching_pool::cached_bytes() const {
  return static_cast<std::size_t>(stats_(metric::reserved_bytes, size_class::all).current -
                                  stats_(metric::allocated_bytes, size_class::all).current);
}

std::string caching_pool::stats_summary() const {
  std::ostringstream s;
  s << "pool stats: allocated " << stats_(metric::allocated_bytes, size_class::all).current
    << " bytes, reserved " << stats_(metric::reserved_bytes, size_class::all).current
    << " bytes, cached " << cached_bytes() << " bytes in "
    << stats_(metric::segment, size_class::all).current << " segments";
  return s.str();
}

void caching_pool::throw_out_of_memory(std::size_t request, const std::string& why,
                                       const std::string& context) {
  std::string summary;
  {
    std::lock_guard lock(mutex_);
    ++stats_[counter::num_ooms];
    summary = stats_summary();
  }
  throw_error(errc::out_of_memory, context + "umem pool " + describe() +
                                       ": out of memory allocating " + std::to_string(request) +
                                       " bytes: " + why + "; " + summary);
}

void caching_pool::count_retry() {
  std::lock_guard lock(mutex_);
  ++stats_[counter::num_alloc_retries];
}

caching_pool::sizing caching_pool::size_request(std::size_t bytes, bool own_segment) const {
  const std::size_t align = config_.alignment;
  if (bytes == 0)
    throw_error(errc::invalid_argument,
                "umem pool " + describe() + ": allocate(0): a request must be at least 1 byte");
  if (bytes > size_max - (align - 1))
    throw_error(errc::invalid_argument, "umem pool " + describe() + ": allocate(" +
                                            std::to_string(bytes) + "): the size overflows when "
                                            "rounded up to the alignment of " +
                                            std::to_string(align) + " bytes");
  sizing z;
  z.rounded = (bytes + align - 1) & ~(align - 1);
  z.pool = z.rounded <= config_.small_max && !own_segment ? size_class::small_pool
                                                          : size_class::large_pool;
  z.medium = z.pool == size_class::small_pool && z.rounded > small_grow_max();
  z.segment_bytes = config_.small_segment_size;
  if (z.pool == size_class::large_pool) {
    const std::size_t r = config_.large_segment_rounding;
    if (z.rounded > size_max - (r - 1))
      throw_error(errc::invalid_argument, "umem pool " + describe() + ": allocate(" +
                                              std::to_string(bytes) + "): the size overflows "
                                              "when rounded up to a segment of a multiple of " +
                                              std::to_string(r) + " bytes");
    z.segment_bytes = large_segment_bytes(z.rounded);
  }
  return z;
}

// Note [Headroom]: sets call_cap_ for one locked call (mutex_ held for the scope's life).
class caching_pool::headroom_scope {
 public:
  headroom_scope(caching_pool& pool, std::size_t headroom) : pool_(pool) {
    const auto reserved =
        static_cast<std::size_t>(pool.stats_(metric::reserved_bytes, size_class::all).current);
    pool.call_cap_ = headroom > unbounded - reserved ? unbounded : reserved + headroom;
  }
  ~headroom_scope() { pool_.call_cap_ = unbounded; }
  headroom_scope(const headroom_scope&) = delete;
  headroom_scope& operator=(const headroom_scope&) = delete;

 private:
  caching_pool& pool_;
};

// Note [Reclaim ladder] over this pool alone: its thread caches, then its trim.
void* caching_pool::climb_alone(std::size_t bytes, std::size_t headroom, bool own_segment) {
  // Note [Headroom]: the bound is the reserved bytes when the call starts plus the headroom, so
  // what a rung gives back widens what the retry may add.
  // Without a bound no reserved_now() (a lock) is needed.
  const std::size_t start = headroom == unbounded ? 0 : reserved_now();
  const std::size_t cap = headroom > unbounded - start ? unbounded : start + headroom;
  auto attempt = [&] {
    const std::size_t room = cap == unbounded ? unbounded : cap - std::min(cap, reserved_now());
    return try_allocate(bytes, room, own_segment);
  };
  // The first attempt before the rungs exist: most requests end here.
  attempt_result first = attempt();
  if (first.p) return first.p;
  reclaim_rungs rungs;
  rungs.attempt = attempt;
  rungs.thread_caches = [this] { return flush_thread_caches(); };
  rungs.trim = [this] { return trim(); };
  rungs.retried = [this] { count_retry(); };
  reclaim_report report;
  attempt_result a = climb_after(std::move(first), rungs, report);
  if (!a.p) throw_out_of_memory(bytes, a.why);
  return a.p;
}

void* caching_pool::allocate(std::size_t bytes, std::size_t headroom) {
  if (void* p = allocate_cached(bytes)) return p;  // Note [Fast path]
  return climb_alone(bytes, headroom, false);
}

void* caching_pool::allocate_segment(std::size_t bytes, std::size_t headroom) {
  return climb_alone(bytes, headroom, true);
}

attempt_result caching_pool::try_allocate(std::size_t bytes, std::size_t headroom,
                                          bool own_segment) {
  if (!own_segment)
    if (void* p = allocate_cached(bytes)) return {p, {}};
  const sizing z = size_request(bytes, own_segment);
  if (own_segment) return try_own_segment(bytes, z, headroom);
  if (z.rounded <= slab_max_)
    if (thread_cache* mine = my_cache()) {
      std::string why;
      if (void* p = allocate_object(*mine, z.rounded, bytes, headroom, why)) return {p, {}};
      if (!why.empty()) return {nullptr, std::move(why)};
      // No slab here: the bins serve, as they do for larger blocks.
      if (void* p = mine->take(z.rounded, bytes)) return {p, {}};
    }
  // Note [Thread cache]: a big request the thread's bins could not serve gives their big blocks
  // back, so that this request (and the pool's merging) can use them.
  std::array<block*, thread_cache::big_bins> returned;
  std::size_t n_returned = 0;
  if (thread_cache::is_big(z.rounded))
    if (thread_cache* mine = my_cache()) n_returned = mine->return_big(returned);
  std::string why;
  const ticketed_block h = allocate_locked(bytes, z, headroom,
                                    std::span<block* const>(returned.data(), n_returned), why);
  if (!h.b) return {nullptr, std::move(why)};
  if (thread_cache* mine = my_cache()) mine->remember(h.b, h.ticket);
  return {reinterpret_cast<void*>(h.b->address), {}};
}

caching_pool::ticketed_block caching_pool::allocate_locked(std::size_t bytes, const sizing& z,
                                                    std::size_t headroom,
                                                    std::span<block* const> returned,
                                                    std::string& why) {
  size_class c = z.pool;
  std::size_t segment_bytes = z.segment_bytes;
  std::lock_guard lock(mutex_);
  const headroom_scope bound(*this, headroom);
  for (block* r : returned) release_cached(r);
  block* b = list_of(c).best_fit(z.rounded);
  if (!b && z.medium) {  // Note [Medium blocks]
    c = size_class::large_pool;
    segment_bytes = large_segment_bytes(z.rounded);
    b = large_.best_fit(z.rounded);
  }
  free_list& list = list_of(c);
  if (b) {
    list.take(b, z.rounded);
    ++stats_[counter::cache_hits];
  } else {
    if (c == size_class::large_pool) decommit_pages_over_cache_cap();
    b = new_segment_block(z.rounded, segment_bytes, c, why);
    if (!b) return {};
  }
  try {
    insert_live(b, live_block{b, c, false});
  } catch (...) {
    list.release(b);
    throw;
  }
  if (decommitted_bytes_ != 0 && c == size_class::large_pool) {
    // Note [Decommitted pages]: granules of this block given back earlier count again.
    segment_record& rec = segments_.at(b->segment_base);
    const std::size_t g = config_.large_segment_rounding;
    const std::uintptr_t begin = b->address / g * g;
    const std::uintptr_t end = (b->address + b->size + g - 1) / g * g;
    if (const std::size_t more = rec.decommitted.covered(begin, end); more != 0) {
      decommit_pages_over_cache_cap();
      auto undo = [&] {
        live_.erase(b->address);
        list.release(b);
      };
      if (over_limit(more)) {
        why = limit_text(more, "reusing given-back pages");
        undo();
        return {};
      }
      try {
        recommit(rec, begin, end);
      } catch (const error& e) {
        undo();
        if (e.code() != errc::out_of_memory) throw;
        why = std::string("the upstream could not take back given-back pages (") + e.what() + ")";
        return {};
      } catch (...) {
        undo();
        throw;
      }
    }
  }
  return mark_live(b, c, bytes);
}

void caching_pool::insert_live(block* b, const live_block& lb) { live_.insert(b->address, lb); }

caching_pool::ticketed_block caching_pool::mark_live(block* b, size_class c, std::size_t bytes) {
  b->requested = bytes;
  b->live_requested.store(bytes, std::memory_order_relaxed);
  const std::uint64_t t = ticket::next_live(b->ticket.load(std::memory_order_relaxed));
  b->ticket.store(t, std::memory_order_release);
  add_to_stats(metric::allocated_bytes, c, signed_size(b->size));
  add_to_stats(metric::requested_bytes, c, signed_size(bytes));
  add_to_stats(metric::allocation, c, 1);
  return {b, t};
}

attempt_result caching_pool::try_own_segment(std::size_t bytes, const sizing& z,
                                             std::size_t headroom) {
  const size_class c = z.pool;
  std::lock_guard lock(mutex_);
  const headroom_scope bound(*this, headroom);
  std::string why;
  const std::optional<segment> seg = obtain_segment(z.segment_bytes, false, why);
  if (!seg) return {nullptr, std::move(why)};
  block* first = add_segment(*seg, c);
  block* b = large_.take(first, seg->size);
  try {
    insert_live(b, live_block{b, c, true});
  } catch (...) {
    large_.release(b);
    release_segment(b, c);
    throw;
  }
  return {reinterpret_cast<void*>(mark_live(b, c, bytes).b->address), {}};
}

block* caching_pool::new_segment_block(std::size_t block_bytes, std::size_t segment_bytes,
                                       size_class c, std::string& why) {
  const bool expandable = c == size_class::large_pool && config_.expandable_segments;
  if (expandable) {
    if (block* b = grow_block(block_bytes, why)) return b;
    if (!why.empty()) return nullptr;  // the growth ran out: no second upstream call
  }
  const std::optional<segment> got = obtain_segment(segment_bytes, expandable, why);
  if (!got) return nullptr;
  const segment& seg = *got;
  block* first = add_segment(seg, c);
  // The newest reservation is the one with room left (Note [Expandable segments]).
  if (expandable && seg.reserved_size > seg.size) growable_ = address_of(seg.base);
  return list_of(c).take(first, block_bytes);
}

// Makes `seg` from the upstream this pool's, as one free block; gives it back on failure.
block* caching_pool::add_segment(const segment& seg, size_class c, bool slabs) {
  const std::uintptr_t base = address_of(seg.base);
  free_list& list = slabs ? slab_chunks_ : list_of(c);
  block* first = nullptr;
  try {
    const auto [it, inserted] =
        segments_.emplace(base, segment_record{seg, nullptr, c, slabs, {}});
    if (!inserted)
      throw_error(errc::internal, "umem pool " + describe() + ": the upstream (" +
                                      upstream_.describe() +
                                      ") returned a segment this pool already holds");
    try {
      first = it->second.first = list.add_segment(base, seg.size);
    } catch (...) {
      segments_.erase(it);
      throw;
    }
  } catch (...) {
    upstream_.deallocate(seg);
    ++stats_[counter::upstream_frees];
    throw;
  }
  add_to_stats(metric::reserved_bytes, c, signed_size(seg.size));
  add_to_stats(metric::segment, c, 1);
  return first;
}

// The most reserved bytes allowed now: limit_bytes and the current call's headroom.
std::size_t caching_pool::reserved_cap() const {
  return std::min(config_.limit_bytes == 0 ? unbounded : config_.limit_bytes, call_cap_);
}

bool caching_pool::over_limit(std::size_t more) const {
  const std::size_t cap = reserved_cap();
  const auto reserved =
      static_cast<std::size_t>(stats_(metric::reserved_bytes, size_class::all).current);
  return cap != unbounded && more > cap - std::min(cap, reserved);
}

std::string caching_pool::limit_text(std::size_t more, const char* what) const {
  const std::string start = std::string(what) + " of " + std::to_string(more) +
                            " bytes would take the reserved bytes from " +
                            std::to_string(stats_(metric::reserved_bytes, size_class::all).current);
  if (config_.limit_bytes == 0 || call_cap_ < config_.limit_bytes)
    return start + " past the " + std::to_string(call_cap_) +
           " bytes this request may reach (the caller's headroom)";
  return start + " past the pool's limit of " + std::to_string(config_.limit_bytes) +
         " bytes (limit_bytes); free memory or raise the limit";
}

block* caching_pool::grow_block(std::size_t block_bytes, std::string& why) {
  if (growable_ == 0) return nullptr;
  // The growth the request needs: what the free tail block of the growable segment lacks,
  // rounded like a new segment.
  block* last = segments_.at(growable_).first;
  while (last->next) last = last->next;
  const std::size_t have = last->allocated ? 0 : last->size;
  const std::size_t r = config_.large_segment_rounding;
  const std::size_t need = (block_bytes - have + r - 1) / r * r;
  if (over_limit(need)) {
    why = limit_text(need, "growing the expandable segment");
    return nullptr;
  }
  segment& seg = segments_.at(growable_).seg;
  const std::size_t before = seg.size;
  bool grown = false;
  try {
    grown = upstream_.grow(seg, need);
  } catch (const error& e) {
    if (e.code() != errc::out_of_memory) throw;
    why = std::string("the upstream has no memory to grow the expandable segment (") + e.what() +
          ")";
    return nullptr;
  }
  if (!grown) {
    // Reservation exhausted (or the source cannot grow): the next new segment takes over.
    growable_ = 0;
    return nullptr;
  }
  ++stats_[counter::upstream_allocs];
  const std::size_t extra = seg.size - before;
  add_to_stats(metric::reserved_bytes, size_class::large_pool, signed_size(extra));
  block* tail = large_.extend_segment(last, extra);
  return large_.take(tail, block_bytes);
}

std::optional<segment> caching_pool::obtain_segment(std::size_t segment_bytes, bool growable,
                                                    std::string& why) {
  if (over_limit(segment_bytes)) {
    why = limit_text(segment_bytes, "a new segment");
    return std::nullopt;
  }
  segment seg;
  try {
    seg = growable ? upstream_.allocate_growable(
                         segment_bytes, std::max(segment_bytes, config_.expandable_reserve_bytes),
                         binding_, kind_)
                   : upstream_.allocate(segment_bytes, binding_, kind_);
  } catch (const error& e) {
    if (e.code() != errc::out_of_memory) throw;
    why = std::string("the upstream has no memory (") + e.what() + ")";
    return std::nullopt;
  }
  ++stats_[counter::upstream_allocs];

  auto give_back = [&] {
    upstream_.deallocate(seg);
    ++stats_[counter::upstream_frees];
  };
  if (seg.size < segment_bytes || address_of(seg.base) % config_.alignment != 0) {
    std::ostringstream s;
    s << "umem pool " << describe() << ": the upstream (" << upstream_.describe()
      << ") returned " << seg.size << " bytes at " << seg.base << " for a request of "
      << segment_bytes << " bytes aligned to " << config_.alignment;
    give_back();
    throw_error(errc::internal, s.str());
  }
  if (over_limit(seg.size)) {
    const std::size_t got = seg.size;
    give_back();
    why = "the upstream rounded a segment of " + std::to_string(segment_bytes) +
          " bytes up to " + std::to_string(got) + ", past the " +
          std::to_string(reserved_cap()) +
          " bytes the pool may reserve (limit_bytes, or the caller's headroom)";
    return std::nullopt;
  }
  return seg;
}

void caching_pool::deallocate(void* p) {
  if (!p || deallocate_cached(p)) return;
  std::lock_guard lock(mutex_);
  if (!free_locked(address_of(p))) fail_bad_free(p);
}

bool caching_pool::deallocate_if_owned(void* p) {
  if (!p || deallocate_cached(p)) return true;
  std::lock_guard lock(mutex_);
  if (free_locked(address_of(p))) return true;
  if (!segment_at(address_of(p))) return false;
  fail_bad_free(p);
}

bool caching_pool::free_locked(std::uintptr_t address) {
  if (const live_block* live = live_.find(address)) {
    release_live(*live);
    return true;
  }
  slab* sl = slab_at(address);
  if (!sl) return false;
  free_object(sl, address);
  return true;
}

const caching_pool::segment_record* caching_pool::segment_at(std::uintptr_t address) const {
  auto it = segments_.upper_bound(address);
  if (it == segments_.begin()) return nullptr;
  --it;
  return address - it->first < it->second.seg.size ? &it->second : nullptr;
}

// A caller's free on the locked path. The ticket says whether the block is still live (not freed
// into a thread's cache before, Note [Thread cache]).
void caching_pool::release_live(const live_block& live) {
  block* b = live.b;
  std::uint64_t t = b->ticket.load(std::memory_order_acquire);
  if (ticket::state_of(t) != ticket::live ||
      !b->ticket.compare_exchange_strong(t, ticket::with_state(t, ticket::free),
                                         std::memory_order_acq_rel))
    fail_cached_free(reinterpret_cast<const void*>(b->address));
  const std::size_t k = live.pool == size_class::small_pool ? 0 : 1;
  returns_.requested_adjust[k] +=
      signed_size(b->live_requested.load(std::memory_order_relaxed)) - signed_size(b->requested);
  return_to_list(live);
}

// A thread-cached block back in the pool: not a caller's free (Note [Statistics with thread
// caches]).
void caching_pool::release_cached(block* b) {
  const live_block& live = *live_.find(b->address);
  const std::size_t k = live.pool == size_class::small_pool ? 0 : 1;
  b->ticket.store(ticket::with_state(b->ticket.load(std::memory_order_relaxed), ticket::free),
                  std::memory_order_relaxed);
  returns_.bytes[k] += signed_size(b->size);
  returns_.count[k] += 1;
  returns_.requested[k] += signed_size(b->requested);
  return_to_list(live);
}

std::size_t caching_pool::flush_thread_caches() { return threads_->steal_all(); }

std::size_t caching_pool::take_back(thread_cache& cache, std::vector<block*>& blocks,
                                    bool exiting) {
  // A cache with nothing to give (emptied by an earlier steal, or never filled) takes no lock.
  if (blocks.empty() && !cache.owns_slabs()) return 0;
  std::size_t bytes = 0;
  std::lock_guard lock(mutex_);
  for (block* b : blocks) {
    bytes += b->size;
    release_cached(b);
  }
  std::vector<slab*> released, orphaned;
  cache.steal_slabs(released, exiting ? &orphaned : nullptr);
  for (slab* sl : released) {
    bytes += slab::bytes;
    release_slab(sl);
  }
  // Their objects are freed here from now on (free_object), and the last one releases the slab.
  for (slab* sl : orphaned) sl->owner.store(nullptr, std::memory_order_relaxed);
  return bytes;
}

void caching_pool::return_to_list(const live_block& live) {
  const live_block lb = live;  // `live` is the table's entry, which the erase may move
  const std::size_t size = lb.b->size;
  const std::size_t requested = lb.b->requested;
  live_.erase(lb.b->address);
  block* first = list_of(lb.pool).release(lb.b);
  add_to_stats(metric::allocated_bytes, lb.pool, -signed_size(size));
  add_to_stats(metric::requested_bytes, lb.pool, -signed_size(requested));
  add_to_stats(metric::allocation, lb.pool, -1);
  if (lb.own_segment) {
    release_segment(first, lb.pool);  // Note [Own segments]
    return;
  }
  release_segments_over_cache_cap();
}

void caching_pool::release_segments_over_cache_cap() {
  if (config_.max_cached_bytes != 0 && cached_bytes() > config_.max_cached_bytes)
    release_free_segments(config_.max_cached_bytes);
}

void caching_pool::decommit_pages_over_cache_cap() {
  const std::size_t keep = config_.max_cached_bytes;
  if (keep != 0 && cached_bytes() > keep) decommit_free_pages(keep);
}

std::size_t caching_pool::decommit_free_pages(std::size_t keep_cached) {
  const std::uintptr_t g = config_.large_segment_rounding;
  struct span {
    segment_record* rec;
    std::uintptr_t begin, end;
  };
  std::vector<span> spans;  // whole granules inside free large blocks, not yet decommitted
  for (auto& entry : segments_) {
    segment_record* rec = &entry.second;  // a named pointer: lambdas cannot capture bindings in C++20
    if (rec->pool != size_class::large_pool || rec->keeps_pages) continue;
    for (const block* b = rec->first; b; b = b->next) {
      if (b->allocated) continue;
      rec->decommitted.for_each_gap((b->address + g - 1) / g * g, (b->address + b->size) / g * g,
                                    [&](std::uintptr_t at, std::uintptr_t stop) {
                                      spans.push_back({rec, at, stop});
                                    });
    }
  }
  std::stable_sort(spans.begin(), spans.end(), [](const span& x, const span& y) {
    return x.end - x.begin > y.end - y.begin;
  });
  std::size_t released = 0;
  for (const span& s : spans) {
    if (cached_bytes() <= keep_cached) break;
    if (s.rec->keeps_pages) continue;
    const std::size_t bytes = s.end - s.begin;
    try {
      if (!upstream_.decommit(s.rec->seg, reinterpret_cast<void*>(s.begin), bytes)) {
        s.rec->keeps_pages = true;
        log().debug("umem pool {}: the upstream ({}) cannot give back pages of the segment at "
                    "{:#x}; not asked again for it",
                    describe(), upstream_.describe(), address_of(s.rec->seg.base));
        continue;
      }
    } catch (const error& e) {
      log().warn("umem pool {}: giving back {} bytes of free pages failed: {}", describe(), bytes,
                 e.what());
      break;
    }
    s.rec->decommitted.insert(s.begin, s.end);
    decommitted_bytes_ += bytes;
    add_to_stats(metric::reserved_bytes, size_class::large_pool, -signed_size(bytes));
    released += bytes;
  }
  if (released != 0)
    log().debug("umem pool {}: gave back {} bytes of free pages", describe(), released);
  return released;
}

void caching_pool::recommit(segment_record& rec, std::uintptr_t begin, std::uintptr_t end) {
  // First the upstream (it may throw, leaving that piece given back), then the bookkeeping.
  rec.decommitted.take(begin, end, [&](std::uintptr_t a, std::uintptr_t e) {
    upstream_.recommit(rec.seg, reinterpret_cast<void*>(a), e - a);
    decommitted_bytes_ -= e - a;
    add_to_stats(metric::reserved_bytes, size_class::large_pool, signed_size(e - a));
  });
}

void caching_pool::fail_bad_free(const void* p) const {
  const std::uintptr_t a = address_of(p);
  std::ostringstream s;
  s << "umem pool " << describe() << ": deallocate(" << p << "): ";
  const segment_record* rec = segment_at(a);
  if (!rec) {
    s << "not allocated by this pool (it lies in none of its segments); free it with the "
         "allocator that returned it";
    throw_error(errc::invalid_argument, s.str());
  }
  const block* b = rec->first;
  while (b->next && b->next->address <= a) b = b->next;
  if (b->allocated)
    s << "not the start of an allocation: it lies " << (a - b->address)
      << " bytes inside the allocated block at " << pointer_of(b->address)
      << "; pass exactly the pointer allocate() returned";
  else if (b->address == a)
    s << "double free: this address starts a block that is already free";
  else
    s << "double free or invalid pointer: it lies inside the free block at "
      << pointer_of(b->address) << " (" << b->size
      << " bytes; a freed block merges into a free lower neighbour)";
  throw_error(errc::invalid_argument, s.str());
}

void caching_pool::fail_cached_free(const void* p) const {
  std::ostringstream s;
  s << "umem pool " << describe() << ": deallocate(" << p
    << "): double free: this block was already freed (it waits in a thread's cache for reuse)";
  throw_error(errc::invalid_argument, s.str());
}

bool caching_pool::owns(const void* p) const {
  const std::uintptr_t a = address_of(p);
  std::lock_guard lock(mutex_);
  return segment_at(a) != nullptr;
}

std::size_t caching_pool::block_size(const void* p) const {
  std::lock_guard lock(mutex_);
  const live_block* live = live_.find(address_of(p));
  if (!live)
    if (const slab* sl = slab_at(address_of(p))) {
      const int g = sl->object_at(address_of(p));
      if (g >= 0 && sl->requested[static_cast<std::size_t>(g)].load(std::memory_order_acquire) != 0)
        return sl->object_size;
    }
  if (!live || ticket::state_of(live->b->ticket.load(
                               std::memory_order_acquire)) != ticket::live) {
    std::ostringstream s;
    s << "umem pool " << describe() << ": block_size(" << p
      << "): not a live allocation of this pool";
    throw_error(errc::invalid_argument, s.str());
  }
  return live->b->size;
}

std::size_t caching_pool::trim() {
  flush_thread_caches();
  std::lock_guard lock(mutex_);
  // Whole free segments first, then the free pages of segments that still hold live blocks
  // (Note [Decommitted pages]).
  const std::size_t segments = release_free_segments(0);
  return segments + decommit_free_pages(0);
}

std::size_t caching_pool::release_free_segments(std::size_t keep_cached) {
  if (small_.free_segment_count() == 0 && large_.free_segment_count() == 0 &&
      slab_chunks_.free_segment_count() == 0)
    return 0;
  std::vector<std::pair<block*, size_class>> candidates;
  for (size_class c : {size_class::small_pool, size_class::large_pool})
    for (block* b : list_of(c).free_segments()) candidates.emplace_back(b, c);
  for (block* b : slab_chunks_.free_segments())
    candidates.emplace_back(b, size_class::small_pool);
  // Largest first: the fewest upstream calls to get under keep_cached.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& x, const auto& y) { return x.first->size > y.first->size; });
  std::size_t released = 0;
  for (const auto& [b, c] : candidates) {
    if (cached_bytes() <= keep_cached) break;
    released += release_segment(b, c);
  }
  if (released != 0)
    log().debug("umem pool {}: returned {} bytes to the upstream", describe(), released);
  return released;
}

// Gives the fully free segment whose first block is `first` back to the upstream; the bytes
// that were still committed (its size less what was given back before).
std::size_t caching_pool::release_segment(block* first, size_class c) {
  const auto it = segments_.find(first->segment_base);
  const segment seg = it->second.seg;
  const std::size_t given_back =
      it->second.decommitted.covered(address_of(seg.base), address_of(seg.base) + seg.size);
  list_of(it->second).remove_segment(first);
  segments_.erase(it);
  if (address_of(seg.base) == growable_) growable_ = 0;
  upstream_.deallocate(seg);
  ++stats_[counter::upstream_frees];
  decommitted_bytes_ -= given_back;
  add_to_stats(metric::reserved_bytes, c, -signed_size(seg.size - given_back));
  add_to_stats(metric::segment, c, -1);
  return seg.size - given_back;
}

pool_stats caching_pool::stats() const {
  const thread_cache_totals t = threads_->totals();
  std::lock_guard lock(mutex_);
  pool_stats s = stats_;
  if (!threads_->enabled()) return s;
  // Note [Statistics with thread caches]: callers' operations = the pool's own hand-outs and
  // locked frees plus the threads' cache hits and cached frees.
  const size_class classes[] = {size_class::small_pool, size_class::large_pool};
  // Note [Slab segments]: slabs (small blocks) out of callers' totals, objects freed here into
  // them.
  const slab_figures none;
  for (std::size_t k = 0; k < 2; ++k) {
    const thread_cache_totals::per_class& tc = t.classes[k];
    const slab_figures& out = k == 0 ? slabs_handed_out_ : none;
    const slab_figures& back = k == 0 ? slabs_given_back_ : none;
    const slab_figures& remote = k == 0 ? remote_frees_ : none;
    auto fold = [&](metric m, std::int64_t allocs, std::int64_t frees) {
      for (size_class c : {classes[k], size_class::all}) {
        stat& g = s(m, c);
        g.allocated += allocs;
        g.freed += frees;
      }
    };
    fold(metric::allocated_bytes, tc.alloc_bytes - out.bytes,
         tc.free_bytes - returns_.bytes[k] + remote.bytes - back.bytes);
    fold(metric::allocation, tc.alloc_count - out.count,
         tc.free_count - returns_.count[k] + remote.count - back.count);
    fold(metric::requested_bytes, tc.alloc_requested - out.requested,
         tc.free_requested - returns_.requested[k] + returns_.requested_adjust[k] +
             remote.requested - back.requested);
  }
  for (metric m : {metric::allocated_bytes, metric::allocation, metric::requested_bytes})
    for (size_class c : {size_class::all, size_class::small_pool, size_class::large_pool}) {
      stat& g = s(m, c);
      g.current = g.allocated - g.freed;
      g.peak = std::max(g.peak, g.current);
    }
  s[counter::cache_hits] += t.hits;
  return s;
}

pool_snapshot caching_pool::snapshot() const {
  std::lock_guard lock(mutex_);
  pool_snapshot out;
  out.segments.reserve(segments_.size());
  for (const auto& [base, rec] : segments_) {
    segment_snapshot s;
    s.base = base;
    s.size = rec.seg.size;
    s.binding = rec.seg.binding;
    s.kind = rec.seg.kind;
    s.huge_pages = rec.seg.huge_pages;
    s.pool = rec.pool;
    for (const block* b = rec.first; b; b = b->next) {
      if (const slab* sl = rec.slabs && b->allocated ? slab_at(b->address) : nullptr) {
        // Each object; the free ones wait in their thread's slab, as cached blocks wait in bins.
        for (std::uint32_t i = 0; i < sl->objects; ++i) {
          const std::uint32_t g = i * (sl->object_size >> slab::granule_shift);
          const std::uint32_t requested = sl->requested[g].load(std::memory_order_acquire);
          s.blocks.push_back({sl->address_of(g) - base, sl->object_size, requested,
                              requested != 0, requested == 0});
        }
        // What no object fills (768-byte objects leave 256 bytes) stays with the slab too.
        if (const std::size_t used = std::size_t{sl->objects} * sl->object_size;
            used != slab::bytes)
          s.blocks.push_back({sl->base + used - base, slab::bytes - used, 0, false, true});
        continue;
      }
      const bool cached = b->allocated && ticket::state_of(b->ticket.load(
                                              std::memory_order_acquire)) == ticket::cached;
      const bool in_use = b->allocated && !cached;
      s.blocks.push_back({b->address - base, b->size,
                          in_use ? b->live_requested.load(std::memory_order_relaxed) : 0, in_use,
                          cached});
    }
    out.segments.push_back(std::move(s));
  }
  return out;
}

// Cached blocks go back first, so that the new peaks start from what callers hold.
void caching_pool::reset_peak_stats() {
  flush_thread_caches();
  std::lock_guard lock(mutex_);
  stats_.reset_peak();
}

void caching_pool::attach_global(global_peak_tracker& global) {
  std::lock_guard lock(mutex_);
  if (global_)
    throw_error(errc::invalid_argument,
                "umem pool " + describe() + ": attach_global: it already reports to a tracker");
  global.absorb(stats_);
  global_ = &global;
}

void* caching_pool::allocate_object(thread_cache& mine, std::size_t rounded, std::size_t bytes,
                                    std::size_t headroom, std::string& why) {
  const std::size_t k = thread_cache::slab_class_of(rounded);
  if (mine.refill(k)) return mine.take_object(bytes);
  std::lock_guard lock(mutex_);
  const headroom_scope bound(*this, headroom);
  slab* sl = new_slab(k, mine, why);
  if (!sl) return nullptr;
  if (!mine.adopt(sl)) {  // a steal is pending: the request takes a block
    release_slab(sl);
    return nullptr;
  }
  return mine.take_object(bytes);
}

slab* caching_pool::new_slab(std::size_t k, thread_cache& owner, std::string& why) {
  if (slab_segments_fail_) return nullptr;
  // What may throw std::bad_alloc comes before any memory is taken, or undoes it: a record (with
  // room for it among the spares, so that release_slab never allocates), then the map entry.
  if (spare_slab_records_.empty()) {
    spare_slab_records_.reserve(slab_records_.size() + 1);
    spare_slab_records_.push_back(&slab_records_.emplace_back());
  }
  block* chunk = slab_chunks_.best_fit(slab::bytes);
  if (chunk) {
    slab_chunks_.take(chunk, slab::bytes);
  } else {
    const std::optional<segment> got = obtain_segment(config_.small_segment_size, false, why);
    if (!got) return nullptr;
    if (address_of(got->base) % slab::bytes != 0) {
      log().warn("umem pool {}: the upstream ({}) returned a segment at {}, not aligned to {} "
                 "bytes: small requests take blocks, not slabs",
                 describe(), upstream_.describe(), got->base, slab::bytes);
      slab_segments_fail_ = true;
      upstream_.deallocate(*got);
      ++stats_[counter::upstream_frees];
      return nullptr;
    }
    chunk = slab_chunks_.take(add_segment(*got, size_class::small_pool, true), slab::bytes);
  }
  slab* sl = spare_slab_records_.back();
  try {
    slabs_by_granule_.insert(slab::granule_of(chunk->address), sl);
  } catch (...) {
    slab_chunks_.release(chunk);
    throw;
  }
  spare_slab_records_.pop_back();
  sl->reset(chunk->address, static_cast<std::uint32_t>((k + 1) * 256),
            static_cast<std::uint32_t>(k));
  sl->chunk = chunk;
  sl->owner.store(&owner, std::memory_order_relaxed);
  const std::int64_t objects = sl->objects;
  add_to_stats(metric::allocated_bytes, size_class::small_pool, signed_size(slab::bytes));
  add_to_stats(metric::requested_bytes, size_class::small_pool, signed_size(slab::bytes));
  add_to_stats(metric::allocation, size_class::small_pool, objects);
  slabs_handed_out_.bytes += signed_size(slab::bytes);
  slabs_handed_out_.count += objects;
  slabs_handed_out_.requested += signed_size(slab::bytes);
  return sl;
}

void caching_pool::release_slab(slab* sl) {
  const std::int64_t objects = sl->objects;
  sl->owner.store(nullptr, std::memory_order_relaxed);
  slabs_by_granule_.erase(slab::granule_of(sl->base));
  slab_chunks_.release(sl->chunk);
  sl->chunk = nullptr;
  spare_slab_records_.push_back(sl);
  add_to_stats(metric::allocated_bytes, size_class::small_pool, -signed_size(slab::bytes));
  add_to_stats(metric::requested_bytes, size_class::small_pool, -signed_size(slab::bytes));
  add_to_stats(metric::allocation, size_class::small_pool, -objects);
  slabs_given_back_.bytes += signed_size(slab::bytes);
  slabs_given_back_.count += objects;
  slabs_given_back_.requested += signed_size(slab::bytes);
  release_segments_over_cache_cap();
}

slab* caching_pool::slab_at(std::uintptr_t address) const {
  slab* const* found = slabs_by_granule_.find(slab::granule_of(address));
  return found ? *found : nullptr;
}

void caching_pool::free_object(slab* sl, std::uintptr_t address) {
  const int g = sl->object_at(address);
  if (g < 0) {
    std::ostringstream s;
    s << "umem pool " << describe() << ": deallocate(" << pointer_of(address)
      << "): not the start of an allocation: it lies inside an object of "
      << sl->object_size << " bytes; pass exactly the pointer allocate() returned";
    throw_error(errc::invalid_argument, s.str());
  }
  const auto at = static_cast<std::size_t>(g);
  // Only the owner makes a free object live again, so a request read here is still the object's
  // unless another free races with this one.
  std::uint32_t request = sl->requested[at].load(std::memory_order_acquire);
  if (request == 0 ||
      !sl->requested[at].compare_exchange_strong(request, 0, std::memory_order_acq_rel))
    fail_cached_free(pointer_of(address));
  remote_frees_.bytes += sl->object_size;
  remote_frees_.count += 1;
  remote_frees_.requested += request;
  if (thread_cache* owner = sl->owner.load(std::memory_order_relaxed)) {
    sl->push_remote(address);
    owner->queue_remote(sl);
    return;
  }
  sl->free_objects[sl->free_count++] = static_cast<std::uint8_t>(at);
  if (sl->free_count == sl->objects) release_slab(sl);
}

void caching_pool::count_spill() {
  std::lock_guard lock(mutex_);
  ++stats_[counter::spills];
}

}  // namespace umem::alloc
