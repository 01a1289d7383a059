// Which GPU runtime a process uses, and why.
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
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "umem/core/topology.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::machine {

enum class gpu_runtime_request { automatic, rocr, cuda, none };

// nullopt or "auto" -> automatic, "rocr", "cuda", "none". Throws umem::error(invalid_argument)
// naming the value and the choices for anything else.
gpu_runtime_request parse_gpu_runtime_request(const std::optional<std::string>& text);

// Chooses the runtime (Note [Backend selection]) for `topo`, which must already hold ROCr's
// verdict (topo.hsa, from discover_rocr through `rocr`; `rocr` null when none loaded). A ROCr
// runtime keeps `rocr` itself: the library is loaded once per process. Lets the chosen runtime
// discover into `topo` and records the choice in topo.gpu_backend. CUDA is loaded from
// `cuda_candidates` (cuda_driver::load_from). Never throws for missing runtimes.
std::shared_ptr<const gpu_runtime> select_gpu_runtime(
    topology& topo, gpu_runtime_request request, std::shared_ptr<const hsa::rocr_library> rocr,
    std::span<const std::string> cuda_candidates);
// The same with UMEM_GPU_BACKEND and cuda_driver::default_candidates(). Throws
// umem::error(invalid_argument) for a bad UMEM_GPU_BACKEND.
std::shared_ptr<const gpu_runtime> select_gpu_runtime(
    topology& topo, std::shared_ptr<const hsa::rocr_library> rocr);

}  // namespace umem::machine
