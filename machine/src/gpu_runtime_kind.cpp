#include "umem/machine/gpu_runtime_kind.hpp"

namespace umem::machine {

const char* to_string(gpu_runtime_kind k) {
  switch (k) {
    case gpu_runtime_kind::rocr:
      return "rocr";
    case gpu_runtime_kind::cuda:
      return "cuda";
    case gpu_runtime_kind::none:
      break;
  }
  return "none";
}

std::optional<gpu_runtime_kind> gpu_runtime_kind_named(std::string_view name) {
  for (const auto k : {gpu_runtime_kind::rocr, gpu_runtime_kind::cuda, gpu_runtime_kind::none})
    if (name == to_string(k)) return k;
  return std::nullopt;
}

gpu_runtime_kind selected_gpu_runtime(const topology& topo) {
  return gpu_runtime_kind_named(topo.gpu_backend.name).value_or(gpu_runtime_kind::none);
}

}  // namespace umem::machine
