#include "stream_safety_checker.hpp"

namespace umem::trace_replay {

void stream_safety_checker::on_alloc(const void* p, std::size_t size, std::uint32_t stream) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t end = begin + size;
  auto it = unsafe_.upper_bound(begin);
  if (it != unsafe_.begin() && std::prev(it)->second.end > begin) --it;
  bool violated = false;
  while (it != unsafe_.end() && it->first < end) {
    violated = violated || it->second.stream != stream;
    it = unsafe_.erase(it);
  }
  violations_ += violated ? 1 : 0;
}

void stream_safety_checker::on_free(const void* p, std::size_t size, std::uint32_t stream) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  unsafe_[begin] = freed_range{begin + size, stream};
}

void stream_safety_checker::on_sync(std::uint32_t stream) {
  for (auto it = unsafe_.begin(); it != unsafe_.end();)
    it = it->second.stream == stream ? unsafe_.erase(it) : std::next(it);
}

}  // namespace umem::trace_replay
