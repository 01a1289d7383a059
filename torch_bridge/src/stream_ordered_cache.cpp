#include "umem/torch_bridge/stream_ordered_cache.hpp"

#include <iterator>

namespace umem::torch_bridge {

stream_ordered_cache::stream_ordered_cache(event_factory events, release_fn release)
    : events_(std::move(events)), release_(std::move(release)) {}

// Blocks still held at destruction stay with the umem allocator, which outlives no one: the
// bridge is never destroyed (c_abi/bridge_instance.hpp), so this runs only in tests.
stream_ordered_cache::~stream_ordered_cache() = default;

bool stream_ordered_cache::drained(const stream_blocks& s) {
  return s.in_free_order.empty() && s.fences.empty();
}

std::unique_ptr<machine::stream_event> stream_ordered_cache::take_event(int device) {
  auto& spare = spare_events_[device];
  if (!spare.empty()) {
    auto e = std::move(spare.back());
    spare.pop_back();
    return e;
  }
  return events_ ? events_(device) : nullptr;
}

void stream_ordered_cache::recycle_events(held& h) {
  for (auto& e : h.events)
    if (e) spare_events_[h.b.device].push_back(std::move(e));
  h.events.clear();
}

bool stream_ordered_cache::record_events(held& h) {
  h.deferred = false;
  for (std::size_t i = 0; i <= h.uses.size(); ++i) {
    auto e = take_event(h.b.device);
    if (!e) {
      recycle_events(h);
      return false;
    }
    e->record(i == 0 ? h.stream : h.uses[i - 1]);
    h.events.push_back(std::move(e));
  }
  return true;
}

bool stream_ordered_cache::completed(held& h, bool wait) {
  if (h.events.empty()) return false;
  for (auto& e : h.events) {
    if (wait)
      e->synchronize();
    else if (!e->query())
      return false;
  }
  return true;
}

void stream_ordered_cache::release(held& h) {
  recycle_events(h);
  release_(h.b, !h.uses.empty());
}

void stream_ordered_cache::deallocate(const held_block& b, void* stream,
                                      std::span<void* const> uses, bool defer) {
  if (uses.empty()) {  // Note [Lazy stream fences]: nothing to record now
    stream_blocks& s = streams_[{b.device, stream}];
    held h{b, stream, {}, {}, false, s.next_seq++};
    s.in_free_order.push_back(std::move(h));
    s.by_size.emplace(std::pair{b.size, s.in_free_order.back().seq},
                      std::prev(s.in_free_order.end()));
    return;
  }
  held h{b, stream, std::vector<void*>(uses.begin(), uses.end()), {}, defer, 0};
  if (!defer) {
    try {
      if (record_events(h) && completed(h, false)) {  // nothing pending: idle streams
        release(h);
        return;
      }
    } catch (...) {
      recycle_events(h);  // an event that failed cannot be trusted: only release_all(true) frees it
      shared_.push_back(std::move(h));
      throw;
    }
  }
  shared_.push_back(std::move(h));
}

std::optional<held_block> stream_ordered_cache::reuse(std::size_t size, int device, void* stream) {
  auto it = streams_.find({device, stream});
  if (it == streams_.end()) return std::nullopt;
  stream_blocks& s = it->second;
  auto fit = s.by_size.lower_bound({size, 0});
  if (fit == s.by_size.end() || fit->first.first / 2 > size) return std::nullopt;
  auto block = fit->second;
  const held_block out = block->b;
  recycle_events(*block);
  forget(s, block, fit);
  return out;
}

void stream_ordered_cache::fence_stream(const stream_key& key, stream_blocks& s) {
  if (s.fenced == s.next_seq || s.fences.size() >= max_fences) return;
  auto e = take_event(key.first);
  if (!e) return;  // no events: the blocks wait for a synchronized release_all
  e->record(key.second);  // throws: the event is dropped, the blocks stay unfenced
  s.fences.push_back(fence{s.next_seq, std::move(e)});
  s.fenced = s.next_seq;
}

void stream_ordered_cache::retire_fences(int device, stream_blocks& s, bool wait) {
  while (!s.fences.empty()) {
    fence& f = s.fences.front();
    if (wait)
      f.event->synchronize();
    else if (!f.event->query())
      return;
    s.done = f.covers;
    spare_events_[device].push_back(std::move(f.event));
    s.fences.pop_front();
  }
}

std::size_t stream_ordered_cache::release_front(const stream_key& key, stream_blocks& s, bool all,
                                                bool wait) {
  if (all && !wait) {  // the caller asserts that every stream has finished
    retire_fences(key.first, s, true);
    s.done = s.fenced = s.next_seq;
  } else {
    if (wait) retire_fences(key.first, s, true);  // makes room for the fence of the newest frees
    fence_stream(key, s);
    retire_fences(key.first, s, wait);
  }
  std::size_t bytes = 0;
  // Blocks are in free order, so the first one no completed fence covers ends the scan.
  while (!s.in_free_order.empty() && s.in_free_order.front().seq < s.done) {
    held& h = s.in_free_order.front();
    const auto indexed = s.by_size.find({h.b.size, h.seq});
    bytes += h.b.size;
    release(h);
    forget(s, s.in_free_order.begin(), indexed);
  }
  return bytes;
}

void stream_ordered_cache::forget(stream_blocks& s, std::list<held>::iterator it,
                                  size_index::iterator key) {
  s.by_size.erase(key);
  s.in_free_order.erase(it);
}

std::size_t stream_ordered_cache::release_shared(bool all, bool wait) {
  std::size_t bytes = 0;
  for (auto it = shared_.begin(); it != shared_.end();) {
    if ((!all || wait) && !completed(*it, wait)) {
      ++it;
      continue;
    }
    bytes += it->b.size;
    release(*it);
    it = shared_.erase(it);
  }
  return bytes;
}

std::size_t stream_ordered_cache::release_completed() {
  std::size_t bytes = release_shared(false, false);
  for (auto it = streams_.begin(); it != streams_.end();) {
    bytes += release_front(it->first, it->second, false, false);
    it = drained(it->second) ? streams_.erase(it) : std::next(it);
  }
  return bytes;
}

std::size_t stream_ordered_cache::release_all(bool synchronized) {
  std::size_t bytes = release_shared(true, !synchronized);
  for (auto it = streams_.begin(); it != streams_.end();) {
    bytes += release_front(it->first, it->second, true, !synchronized);
    it = drained(it->second) ? streams_.erase(it) : std::next(it);
  }
  return bytes;
}

void stream_ordered_cache::arm_deferred() {
  for (auto& [key, s] : streams_) fence_stream(key, s);
  for (held& h : shared_)
    if (h.deferred) record_events(h);
}

bool stream_ordered_cache::wait_for_stream(int device, void* stream) {
  auto e = take_event(device);
  if (!e) return false;
  e->record(stream);
  e->synchronize();
  spare_events_[device].push_back(std::move(e));
  return true;
}

std::size_t stream_ordered_cache::held_bytes(int device) const {
  std::size_t bytes = 0;
  for (const auto& [key, s] : streams_)
    if (device < 0 || key.first == device)
      for (const held& h : s.in_free_order) bytes += h.b.size;
  for (const held& h : shared_)
    if (device < 0 || h.b.device == device) bytes += h.b.size;
  return bytes;
}

}  // namespace umem::torch_bridge
