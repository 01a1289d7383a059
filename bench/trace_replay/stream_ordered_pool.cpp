#include "stream_ordered_pool.hpp"

namespace umem::trace_replay {

stream_ordered_pool::stream_ordered_pool(alloc::caching_pool& pool, bool multi_stream)
    : pool_(pool), multi_stream_(multi_stream) {}

void* stream_ordered_pool::allocate(std::size_t bytes, std::uint32_t stream) {
  if (multi_stream_) {
    const auto it = pending_.find(stream);
    if (it != pending_.end()) {
      const std::size_t align = pool_.config().alignment;
      const std::size_t rounded = (bytes + align - 1) & ~(align - 1);
      auto& pending = it->second;
      const auto fit = pending.lower_bound(rounded);
      if (fit != pending.end() && fit->first - rounded <= fit->first / 8) {
        void* p = fit->second;
        pending.erase(fit);
        ++pending_reuses_;
        return p;
      }
    }
  }
  return pool_.allocate(bytes);
}

void stream_ordered_pool::deallocate(void* p, std::uint32_t stream) {
  if (!multi_stream_) {
    pool_.deallocate(p);
    return;
  }
  pending_[stream].emplace(pool_.block_size(p), p);
}

void stream_ordered_pool::release(std::multimap<std::size_t, void*>& pending) {
  for (const auto& [size, p] : pending) pool_.deallocate(p);
  pending.clear();
}

void stream_ordered_pool::synchronize(std::uint32_t stream) {
  const auto it = pending_.find(stream);
  if (it != pending_.end()) release(it->second);
}

void stream_ordered_pool::synchronize_all() {
  for (auto& [stream, pending] : pending_) release(pending);
}

std::size_t stream_ordered_pool::pending_blocks() const {
  std::size_t n = 0;
  for (const auto& [stream, pending] : pending_) n += pending.size();
  return n;
}

}  // namespace umem::trace_replay
