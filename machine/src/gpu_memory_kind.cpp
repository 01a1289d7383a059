// Note [Device memory kinds] (gpu_memory_kind.hpp).
#include "umem/machine/gpu_memory_kind.hpp"

namespace umem::machine {

const char* to_string(gpu_memory_kind k) {
  return k == gpu_memory_kind::unified ? "unified" : "discrete";
}

gpu_memory_kind memory_kind_of(const agent& gpu) {
  if (gpu.cuda)
    return gpu.cuda->pageable_memory_access == true || gpu.cuda->integrated == true
               ? gpu_memory_kind::unified
               : gpu_memory_kind::discrete;
  return gpu.is_apu == false ? gpu_memory_kind::discrete : gpu_memory_kind::unified;
}

}  // namespace umem::machine
