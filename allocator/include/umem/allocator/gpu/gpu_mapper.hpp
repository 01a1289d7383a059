// Making host memory usable by the socket's GPU(s), decided by the runtime's state, not by the
// caller. Implementations: HIP (a process that loaded it: registered with hipHostRegister,
// hip_gpu_mapper.hpp), ROCr (XNACK on: SVM attributes; XNACK off: lock to the CPU agent's pool of
// the node + allow access), CUDA (cuda_gpu_mapper.hpp) and none (no GPU runtime: host NUMA
// allocator only). make_gpu_mapper chooses one (gpu_visibility.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "umem/allocator/source/segment.hpp"

namespace umem::alloc {

class gpu_mapper {
 public:
  virtual ~gpu_mapper() = default;
  // Makes `s` accessible to the GPU agents local to its node (all GPUs for interleaved segments).
  // Throws umem::error(runtime_error) naming the ROCr call that failed.
  virtual void map(const segment& s) = 0;
  virtual void unmap(const segment& s) noexcept = 0;
  // False for the no-GPU mapper: memory is host-only.
  virtual bool gpu_accessible() const = 0;
  // True when mapped memory stays pageable, so its free pages may be given back to the system
  // (Note [Decommitted pages] in segment.hpp): host-only memory, or SVM ranges the GPU reaches
  // through retried faults. False for pinned memory (locks, registrations).
  virtual bool pageable() const = 0;
  // One sentence: which mechanism is used and why ("XNACK off: locked to CPU agent 0's fine pool").
  virtual std::string describe() const = 0;
  // Makes [p, p + bytes) of memory umem did not allocate usable by the GPU runtime's own calls
  // (copies, fills) for as long as the returned handle lives: a zero-copy alias's life. Where
  // every GPU reaches host memory already (XNACK on, pageable memory access) only a runtime with
  // its own registry of memory (HIP) needs it; elsewhere only a mapper that pins foreign memory
  // (pins_foreign()) makes the GPU reach it at all. Null when nothing is needed, as here. Throws
  // umem::error (unsupported) with the reason when the range cannot be registered.
  virtual std::shared_ptr<void> register_foreign(const void* p, std::size_t bytes);
  // True when register_foreign pins the range for the GPU, so that memory the GPU could not reach
  // (XNACK off) becomes usable in place while the handle lives.
  virtual bool pins_foreign() const { return false; }
};

inline std::shared_ptr<void> gpu_mapper::register_foreign(const void*, std::size_t) {
  return nullptr;
}

}  // namespace umem::alloc
