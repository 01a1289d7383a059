// The GPU runtime this process uses (Note [Backend selection] in gpu_runtime_selection.hpp): what
// it reports about the machine and the runtime handles the layers above build on (the allocator
// makes memory GPU-visible with them: allocator/gpu/gpu_visibility.hpp).
#pragma once

#include <memory>
#include <string>

#include "umem/core/topology.hpp"
#include "umem/machine/gpu_runtime_kind.hpp"
#include "umem/machine/stream_event.hpp"

namespace umem::hsa {
class rocr_library;
}
namespace umem::cuda {
class cuda_driver;
}
namespace umem::hip {
class hip_runtime;
}

namespace umem::machine {

class gpu_runtime {
 public:
  virtual ~gpu_runtime() = default;
  virtual gpu_runtime_kind kind() const = 0;
  // One sentence: why this runtime was selected.
  virtual const std::string& reason() const = 0;
  // Adds this runtime's GPUs and state to `topo` (ROCr: only if topo.hsa was not probed yet,
  // since selection already needed its discovery). GPU->NUMA binding stays the caller's job
  // (umem::numa::map_gpus_to_numa). Never throws for a missing driver (recorded in topo).
  virtual void discover(topology& topo) const = 0;
  // Whether plain host memory (malloc, mmap) is usable by every GPU of `topo` without
  // registering it: XNACK on (ROCr), PAGEABLE_MEMORY_ACCESS on every device (CUDA), never for
  // none.
  virtual bool host_memory_gpu_accessible(const topology& topo) const = 0;
  // False where make_stream_event throws unsupported: ROCr when the process has not loaded HIP
  // (decided once, when the runtime is made; make_rocr_runtime).
  virtual bool has_stream_events() const = 0;
  // An event for streams of GPU `device` (the runtime's device ordinal). Throws umem::error:
  // unsupported (see has_stream_events), invalid_argument for an unknown device, runtime_error.
  virtual std::unique_ptr<stream_event> make_stream_event(int device) const = 0;

  // The loaded libraries, for whoever builds on them (each keeps its library loaded): ROCr's
  // (kind rocr), the HIP runtime the process had loaded when the runtime was made (kind rocr;
  // null without HIP), the CUDA driver (kind cuda). Null for the other kinds.
  virtual std::shared_ptr<const hsa::rocr_library> rocr() const { return nullptr; }
  virtual std::shared_ptr<const hip::hip_runtime> hip() const { return nullptr; }
  virtual std::shared_ptr<const cuda::cuda_driver> cuda_driver() const { return nullptr; }
};

// The runtimes themselves (selection uses these; tests may build one directly).
// ROCr on the loaded library `rocr` (kept loaded by the runtime and what is built on it), with
// stream events when the HIP runtime is already loaded in the process (hip_runtime.hpp:
// UMEM_HIP_RUNTIME_LIB, else libamdhip64's sonames; never loaded by umem). `reason` gets
// "; stream events: HIP <path>" or "; no stream events: <why>" appended.
std::shared_ptr<const gpu_runtime> make_rocr_runtime(std::shared_ptr<const hsa::rocr_library> rocr,
                                                     std::string reason);
// CUDA on an initialised-or-not driver (discover() runs cuInit).
std::shared_ptr<const gpu_runtime> make_cuda_runtime(std::shared_ptr<const cuda::cuda_driver> drv,
                                                     std::string reason);
std::shared_ptr<const gpu_runtime> make_no_runtime(std::string reason);

}  // namespace umem::machine
