// Making host memory usable by the socket's GPU(s), decided by the runtime's state, not by the
// caller. Implementations: ROCr (XNACK on: SVM attributes; XNACK off: lock to the CPU agent's
// pool of the node + allow access) and none (no GPU runtime: host NUMA allocator only).
#pragma once

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
};

}  // namespace umem::alloc
