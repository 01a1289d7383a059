#include "umem/torch_bridge/stream_ordered_cache.hpp"

#include <iterator>

namespace umem::torch_bridge {

stream_ordered_cache::stream_ordered_cache(event_factory events, std::function<void(void*)> release)
    : events_(std::move(events)), release_(std::move(release)) {}

// Blocks still held at destruction stay with the umem allocator, which outlives no one: the
// bridge is never destroyed (see bridge.cpp), so this runs only in tests.
stream_ordered_cache::~stream_ordered_cache() = default;

std::unique_ptr<alloc::stream_event> stream_ordered_cache::take_event(int device) {
  auto& spare = spare_events_[device];
  if (!spare.empty()) {
    auto e = std::move(spare.back());
    spare.pop_back();
    return e;
  }
  return events_ ? events_(device) : nullptr;
}

void stream_ordered_cache::recycle_event(int device, std::unique_ptr<alloc::stream_event> e) {
  if (e) spare_events_[device].push_back(std::move(e));
}

void stream_ordered_cache::deallocate(void* p, std::size_t size, int device, void* stream) {
  std::lock_guard lock(mutex_);
  stream_blocks& s = streams_[{device, stream}];
  auto keep = [&](std::unique_ptr<alloc::stream_event> e) {
    s.in_free_order.push_back(held{p, size, std::move(e)});
    s.by_size.emplace(size, std::prev(s.in_free_order.end()));
  };
  std::unique_ptr<alloc::stream_event> event;
  try {
    event = take_event(device);
    if (event) {
      event->record(stream);
      if (event->query()) {  // nothing pending on the stream: no GPU, or an idle one
        recycle_event(device, std::move(event));
        release_(p);
        return;
      }
    }
  } catch (...) {
    keep(nullptr);  // the event cannot be trusted: only a synchronized release_all frees it
    throw;
  }
  keep(std::move(event));
}

std::pair<void*, std::size_t> stream_ordered_cache::reuse(std::size_t size, int device,
                                                          void* stream) {
  std::lock_guard lock(mutex_);
  auto it = streams_.find({device, stream});
  if (it == streams_.end()) return {nullptr, 0};
  stream_blocks& s = it->second;
  auto fit = s.by_size.lower_bound(size);
  if (fit == s.by_size.end() || fit->first / 2 > size) return {nullptr, 0};
  auto block = fit->second;
  const std::pair<void*, std::size_t> out{block->p, block->size};
  recycle_event(device, std::move(block->event));
  s.by_size.erase(fit);
  s.in_free_order.erase(block);
  return out;
}

std::size_t stream_ordered_cache::release_front(stream_blocks& s, int device, bool all,
                                                bool wait) {
  std::size_t bytes = 0;
  while (!s.in_free_order.empty()) {
    held& h = s.in_free_order.front();
    if (!all) {
      // Events of one stream complete in order: the first pending one ends the scan.
      if (!h.event || !h.event->query()) break;
    } else if (wait && h.event) {
      h.event->synchronize();
    } else if (wait && !h.event) {
      break;  // nothing to wait on: only a synchronized release may take it
    }
    for (auto f = s.by_size.lower_bound(h.size); f != s.by_size.end(); ++f)
      if (f->second == s.in_free_order.begin()) {
        s.by_size.erase(f);
        break;
      }
    release_(h.p);
    bytes += h.size;
    recycle_event(device, std::move(h.event));
    s.in_free_order.pop_front();
  }
  return bytes;
}

std::size_t stream_ordered_cache::release_completed() {
  std::lock_guard lock(mutex_);
  std::size_t bytes = 0;
  for (auto it = streams_.begin(); it != streams_.end();) {
    bytes += release_front(it->second, it->first.first, false, false);
    it = it->second.in_free_order.empty() ? streams_.erase(it) : std::next(it);
  }
  return bytes;
}

std::size_t stream_ordered_cache::release_all(bool synchronized) {
  std::lock_guard lock(mutex_);
  std::size_t bytes = 0;
  for (auto it = streams_.begin(); it != streams_.end();) {
    bytes += release_front(it->second, it->first.first, true, !synchronized);
    it = it->second.in_free_order.empty() ? streams_.erase(it) : std::next(it);
  }
  return bytes;
}

std::size_t stream_ordered_cache::held_bytes(int device) const {
  std::lock_guard lock(mutex_);
  std::size_t bytes = 0;
  for (const auto& [key, s] : streams_)
    if (device < 0 || key.first == device)
      for (const held& h : s.in_free_order) bytes += h.size;
  return bytes;
}

}  // namespace umem::torch_bridge
