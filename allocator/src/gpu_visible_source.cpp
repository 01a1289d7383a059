#include "umem/allocator/gpu_visible_source.hpp"

namespace umem::alloc {

segment gpu_visible_source::allocate(std::size_t bytes, const node_binding& where, coherence kind) {
  segment s = upstream_.allocate(bytes, where, kind);
  try {
    mapper_.map(s);
  } catch (...) {
    upstream_.deallocate(s);  // never leak a segment the GPU cannot use
    throw;
  }
  return s;
}

void gpu_visible_source::deallocate(const segment& s) noexcept {
  mapper_.unmap(s);
  upstream_.deallocate(s);
}

std::string gpu_visible_source::describe() const {
  return upstream_.describe() + "; GPU access: " + mapper_.describe();
}

}  // namespace umem::alloc
