#include "umem/allocator/gpu/no_gpu_mapper.hpp"

namespace umem::alloc {

std::string no_gpu_mapper::describe() const {
  return "no GPU runtime (" + reason_ + "): host NUMA memory only";
}

}  // namespace umem::alloc
