// Note [Backend selection] (gpu_runtime_selection.hpp): which runtime a process uses, and why.
#include <utility>

#include "umem/machine/gpu_runtime_selection.hpp"

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/options.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::machine {

namespace {

// "<state>: <the reason's first line>": a runtime's full reason lists every path it tried, one a
// line; the selection reason stays one line (topo.hsa / topo.cuda keep the whole text).
std::string verdict(runtime_state state, const std::string& reason) {
  std::string first = reason.substr(0, reason.find('\n'));
  if (first.ends_with("; tried:")) first.resize(first.size() - 8);
  std::string out = to_string(state);
  if (!first.empty()) out += ": " + first;
  return out;
}

// Loads the driver and lets a CUDA runtime discover into `topo`; the runtime when the driver has
// at least one device, else null with `why_not` set.
std::shared_ptr<const gpu_runtime> try_cuda(topology& topo,
                                            std::span<const std::string> candidates,
                                            const std::string& reason_prefix,
                                            std::string& why_not) {
  std::shared_ptr<const cuda::cuda_driver> drv;
  try {
    drv = std::make_shared<const cuda::cuda_driver>(cuda::cuda_driver::load_from(candidates));
  } catch (const error& e) {
    topo.cuda = {};
    topo.cuda.state = e.code() == errc::runtime_unavailable ? runtime_state::no_library
                                                              : runtime_state::init_failed;
    topo.cuda.state_reason = e.what();
    topo.sources.emplace_back("cuda");
    why_not = "the CUDA driver is " + verdict(topo.cuda.state, topo.cuda.state_reason);
    return nullptr;
  }
  const std::size_t before = topo.gpus().size();
  auto runtime = make_cuda_runtime(drv, "");
  runtime->discover(topo);
  const std::size_t devices = topo.gpus().size() - before;
  if (topo.cuda.state != runtime_state::available || devices == 0) {
    why_not = "the CUDA driver " + drv->resolved_path() + " is " +
              verdict(topo.cuda.state, topo.cuda.state_reason);
    return nullptr;
  }
  return make_cuda_runtime(drv, reason_prefix + "the CUDA driver " + drv->resolved_path() +
                                    " has " + std::to_string(devices) + " device" +
                                    (devices == 1 ? "" : "s"));
}

}  // namespace

gpu_runtime_request parse_gpu_runtime_request(const std::optional<std::string>& text) {
  if (!text || *text == "auto") return gpu_runtime_request::automatic;
  if (*text == "rocr") return gpu_runtime_request::rocr;
  if (*text == "cuda") return gpu_runtime_request::cuda;
  if (*text == "none") return gpu_runtime_request::none;
  throw_error(errc::invalid_argument, "UMEM_GPU_BACKEND='" + *text +
                                          "' is not a GPU backend; use auto, rocr, cuda or none");
}

std::shared_ptr<const gpu_runtime> select_gpu_runtime(
    topology& topo, gpu_runtime_request request, std::shared_ptr<const hsa::rocr_library> rocr,
    std::span<const std::string> cuda_candidates) {
  const bool rocr_ok = rocr != nullptr && topo.hsa.state == runtime_state::available;
  const std::string rocr_text =
      rocr_ok ? "the ROCm runtime " + rocr->resolved_path() + " is available"
              : "the ROCm runtime is " + verdict(topo.hsa.state, topo.hsa.state_reason);
  std::shared_ptr<const gpu_runtime> chosen;
  std::string why_not;
  switch (request) {
    case gpu_runtime_request::none:
      chosen = make_no_runtime("UMEM_GPU_BACKEND=none");
      break;
    case gpu_runtime_request::rocr:
      if (rocr_ok) {
        chosen = make_rocr_runtime(std::move(rocr), "UMEM_GPU_BACKEND=rocr; " + rocr_text);
      } else {
        chosen = make_no_runtime("UMEM_GPU_BACKEND=rocr, but " + rocr_text);
        log().warn("GPU backend: {}; host NUMA memory only", chosen->reason());
      }
      break;
    case gpu_runtime_request::cuda:
      chosen = try_cuda(topo, cuda_candidates, "UMEM_GPU_BACKEND=cuda; ", why_not);
      if (!chosen) {
        chosen = make_no_runtime("UMEM_GPU_BACKEND=cuda, but " + why_not);
        log().warn("GPU backend: {}; host NUMA memory only", chosen->reason());
      }
      break;
    case gpu_runtime_request::automatic:
      if (rocr_ok) {
        chosen = make_rocr_runtime(std::move(rocr), rocr_text);
        break;
      }
      chosen = try_cuda(topo, cuda_candidates, rocr_text + "; ", why_not);
      if (!chosen) chosen = make_no_runtime(rocr_text + "; " + why_not);
      break;
  }
  topo.gpu_backend = {to_string(chosen->kind()), chosen->reason()};
  log().debug("GPU backend {}: {}", to_string(chosen->kind()), chosen->reason());
  return chosen;
}

std::shared_ptr<const gpu_runtime> select_gpu_runtime(
    topology& topo, std::shared_ptr<const hsa::rocr_library> rocr) {
  const auto request = parse_gpu_runtime_request(env_value("UMEM_GPU_BACKEND"));
  return select_gpu_runtime(topo, request, std::move(rocr),
                            cuda::cuda_driver::default_candidates());
}

}  // namespace umem::machine
