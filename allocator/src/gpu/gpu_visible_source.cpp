#include "umem/allocator/gpu/gpu_visible_source.hpp"

namespace umem::alloc {

segment gpu_visible_source::map_or_release(segment s) {
  try {
    mapper_.map(s);
  } catch (...) {
    upstream_.deallocate(s);  // never leak a segment the GPU cannot use
    throw;
  }
  return s;
}

segment gpu_visible_source::allocate(std::size_t bytes, const node_binding& where, coherence kind) {
  return map_or_release(upstream_.allocate(bytes, where, kind));
}

segment gpu_visible_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                              const node_binding& where, coherence kind) {
  if (!mapper_.pageable()) return allocate(bytes, where, kind);  // Note [Pinned memory does not grow]
  segment s = map_or_release(upstream_.allocate_growable(bytes, reserve_bytes, where, kind));
  if (s.reserved_size > s.size) {
    try {
      std::lock_guard lock(mutex_);
      pieces_[s.base] = {s.size};
    } catch (...) {
      deallocate(s);
      throw;
    }
  }
  return s;
}

bool gpu_visible_source::grow(segment& s, std::size_t extra_bytes) {
  if (!mapper_.pageable()) return false;
  segment grown = s;
  if (!upstream_.grow(grown, extra_bytes)) return false;
  segment piece = grown;
  piece.base = static_cast<unsigned char*>(s.base) + s.size;
  piece.size = grown.size - s.size;
  piece.reserved_size = 0;
  if (piece.size == 0) return true;
  {
    std::lock_guard lock(mutex_);
    pieces_.at(s.base).reserve(pieces_.at(s.base).size() + 1);  // push_back below cannot throw
  }
  mapper_.map(piece);
  {
    std::lock_guard lock(mutex_);
    pieces_.at(s.base).push_back(piece.size);
  }
  s = grown;
  return true;
}

bool gpu_visible_source::decommit(const segment& s, void* p, std::size_t bytes) {
  return mapper_.pageable() && upstream_.decommit(s, p, bytes);
}

// The mapping stayed (only pageable mappings decommit): the upstream's pages are all it takes.
void gpu_visible_source::recommit(const segment& s, void* p, std::size_t bytes) {
  upstream_.recommit(s, p, bytes);
}

void gpu_visible_source::deallocate(const segment& s) noexcept {
  std::vector<std::size_t> sizes;
  {
    std::lock_guard lock(mutex_);
    if (auto it = pieces_.find(s.base); it != pieces_.end()) {
      sizes = std::move(it->second);
      pieces_.erase(it);
    }
  }
  if (sizes.empty()) {
    mapper_.unmap(s);
  } else {
    segment piece = s;
    piece.reserved_size = 0;
    for (const std::size_t size : sizes) {
      piece.size = size;
      mapper_.unmap(piece);
      piece.base = static_cast<unsigned char*>(piece.base) + size;
    }
  }
  upstream_.deallocate(s);
}

std::string gpu_visible_source::describe() const {
  return upstream_.describe() + "; GPU access: " + mapper_.describe();
}

}  // namespace umem::alloc
