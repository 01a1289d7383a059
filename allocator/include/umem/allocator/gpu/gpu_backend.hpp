// The GPU backend seam: everything vendor-specific the allocator and the torch bridge need,
// behind one small interface.
//
// Note [Backend selection]
// UMEM_GPU_BACKEND=auto (the default) picks ROCr when its runtime state is `available` (hsa_init
// succeeded), else CUDA when libcuda.so.1 loads, cuInit succeeds and it has at least one device,
// else none. rocr|cuda|none force one; a forced backend that is not usable here falls back to
// none with a warning (the reason says what was asked and what was found), so a node without
// that GPU still runs as a host NUMA allocator. ROCr is discovered before selection (its verdict
// decides it); CUDA is probed only when auto reaches it or it is forced, so an AMD node never
// loads libcuda. The choice and its reason are recorded in topology::gpu_backend (umtopo shows
// them).
//
// What each backend means by "GPU-accessible host memory":
//   rocr: HIP loaded in the process -> registered with HIP (hipHostRegister), whatever XNACK
//         says (hip_gpu_mapper.hpp, Note [GPU visibility under HIP]); otherwise XNACK on -> SVM
//         attributes, off -> locked to the node's CPU pool (rocr_gpu_mapper.hpp).
//   cuda: PAGEABLE_MEMORY_ACCESS (HMM, Grace) -> nothing to do; otherwise registered with the
//         driver, portable and device-mapped, at the same address (cuda_gpu_mapper.hpp).
//   none: host memory only.
// And what `device:D` placements get (Note [Device memory kinds] in gpu_memory_kind.hpp):
//   cuda: discrete devices -> the device's own memory (cuda_device_source.hpp); unified ones ->
//         host memory on the GPU's node, as every other placement.
//   rocr: discrete GPUs (MI300X) -> the GPU's coarse-grained VRAM pool (rocr_device_source.hpp;
//         known to HIP as a pool allocation; its segments do not grow when HIP is loaded);
//         unified ones (MI300A) -> host memory on the GPU's node.
//   none: host memory.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "umem/allocator/source/device_memory_source.hpp"
#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/allocator/gpu/stream_event.hpp"
#include "umem/core/topology.hpp"

namespace umem::hsa {
class rocr_library;
}
namespace umem::cuda {
class cuda_driver;
}

namespace umem::alloc {

// GPU `device` of topo.gpus() (the index placements use). Throws umem::error(invalid_argument)
// naming how many GPUs the topology has.
const agent& gpu_of(const topology& topo, int device);

class gpu_backend {
 public:
  virtual ~gpu_backend() = default;
  // "rocr", "cuda" or "none".
  virtual const char* name() const = 0;
  // One sentence: why this backend was selected.
  virtual const std::string& reason() const = 0;
  // Adds this backend's GPUs and runtime state to `topo` (ROCr: only if topo.hsa was not probed
  // yet, since selection already needed its discovery). GPU->NUMA binding stays the caller's
  // job (umem::numa::map_gpus_to_numa). Never throws for a missing driver (recorded in topo).
  virtual void discover(topology& topo) const = 0;
  // Whether plain host memory (malloc, mmap) is usable by every GPU of `topo` without map():
  // XNACK on (ROCr), PAGEABLE_MEMORY_ACCESS on every device (CUDA), never for none.
  virtual bool host_memory_gpu_accessible(const topology& topo) const = 0;
  // The mapper that makes host ranges GPU-accessible; `topo` must come from discover() and carry
  // GPU->NUMA bindings. The mapper keeps what it needs of the backend alive. Throws what the
  // mapper constructors throw.
  virtual std::unique_ptr<gpu_mapper> make_mapper(const topology& topo) const = 0;
  // The source of GPU `device`'s own memory (`device` indexes topo.gpus(), as placements do),
  // for a discrete GPU this backend can allocate on; null when `device:D` stays host memory
  // (unified GPUs, GPUs of another runtime, and every GPU of the none backend). `topo` must come from
  // discover(). The source keeps what it needs of the backend alive. Throws umem::error:
  // invalid_argument for an unknown device; what the source's constructor throws.
  virtual std::unique_ptr<device_memory_source> make_device_memory_source(const topology& topo,
                                                                          int device) const = 0;
  // False where make_stream_event throws unsupported: ROCr when the process has not loaded HIP
  // (decided once, when the backend is made; make_rocr_backend).
  virtual bool has_stream_events() const = 0;
  // An event for streams of GPU `device` (the backend's device ordinal). Throws umem::error:
  // unsupported (see has_stream_events), invalid_argument for an unknown device, runtime_error.
  virtual std::unique_ptr<stream_event> make_stream_event(int device) const = 0;
};

enum class gpu_backend_request { automatic, rocr, cuda, none };

// nullopt or "auto" -> automatic, "rocr", "cuda", "none". Throws umem::error(invalid_argument)
// naming the value and the choices for anything else.
gpu_backend_request parse_gpu_backend_request(const std::optional<std::string>& text);

// Chooses the backend (Note [Backend selection]) for `topo`, which must already hold ROCr's
// verdict (topo.hsa, from discover_rocr through `rocr`; `rocr` null when none loaded). A ROCr
// backend keeps `rocr` itself: the runtime is loaded once per process. Lets the
// chosen backend discover into `topo` and records the choice in topo.gpu_backend. CUDA is loaded
// from `cuda_candidates` (cuda_driver::load_from). Never throws for missing runtimes.
std::shared_ptr<const gpu_backend> select_gpu_backend(
    topology& topo, gpu_backend_request request, std::shared_ptr<const hsa::rocr_library> rocr,
    std::span<const std::string> cuda_candidates);
// The same with UMEM_GPU_BACKEND and cuda_driver::default_candidates(). Throws
// umem::error(invalid_argument) for a bad UMEM_GPU_BACKEND.
std::shared_ptr<const gpu_backend> select_gpu_backend(
    topology& topo, std::shared_ptr<const hsa::rocr_library> rocr);

// The backends themselves (selection uses these; tests may build one directly).
// ROCr on the loaded library `rocr` (kept loaded by the backend and its mappers), with
// stream events when the HIP runtime is already loaded in the process (hip_runtime.hpp:
// UMEM_HIP_RUNTIME_LIB, else libamdhip64's sonames; never loaded by umem). `reason` gets
// "; stream events: HIP <path>" or "; no stream events: <why>" appended.
std::shared_ptr<const gpu_backend> make_rocr_backend(
    std::shared_ptr<const hsa::rocr_library> rocr, std::string reason);
// CUDA on an initialised-or-not driver (discover() runs cuInit).
std::shared_ptr<const gpu_backend> make_cuda_backend(std::shared_ptr<const cuda::cuda_driver> drv,
                                                     std::string reason);
std::shared_ptr<const gpu_backend> make_no_backend(std::string reason);

}  // namespace umem::alloc
