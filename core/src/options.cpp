#include "umem/core/options.hpp"

#include <array>
#include <cstdlib>
#include <cstring>

#include "umem/core/error.hpp"

namespace umem {
namespace {

constexpr std::array kOptions{
    env_option{"UMEM_LOG_LEVEL", "warn",
               "Log level: trace, debug, info, warn, error, critical, off."},
    env_option{"UMEM_HSA_RUNTIME_LIB", "unset",
               "Path of libhsa-runtime64.so.1 to load; tried before $ROCM_PATH/lib, "
               "/opt/rocm/lib and the default library search path."},
    env_option{"UMEM_CUDA_DRIVER_LIB", "unset",
               "Path of the CUDA driver library (libcuda.so.1) to load; tried before the default "
               "library search path."},
    env_option{"UMEM_HIP_RUNTIME_LIB", "unset",
               "Path or soname of the HIP runtime (libamdhip64) the process has already loaded, "
               "looked for before libamdhip64.so, .so.6, .so.7 and .so.5; umem never loads HIP "
               "itself, it only uses one already loaded (for the ROCr backend's stream events)."},
    env_option{"UMEM_GPU_BACKEND", "auto",
               "GPU backend: auto (ROCr when its runtime is available, else CUDA when the driver "
               "loads and has a device, else none), rocr, cuda or none."},
    env_option{"UMEM_ALLOC_CONF", "unset",
               "Allocator options as key:value pairs separated by commas, e.g. "
               "policy:node:1,spill:warn (keys: see the allocator options table)."},
    env_option{"ROCM_PATH", "unset", "ROCm install prefix; $ROCM_PATH/lib is searched for ROCr."},
    env_option{"HSA_XNACK", "unset",
               "Read by ROCr itself at hsa_init (1 = XNACK on); umem reports it, never sets it."},
};

}  // namespace

std::span<const env_option> env_options() { return kOptions; }

std::optional<std::string> env_value(const char* env_name) {
  bool listed = false;
  for (const auto& opt : kOptions) listed = listed || std::strcmp(opt.env_name, env_name) == 0;
  if (!listed) throw_error(errc::internal, std::string("option not in the table: ") + env_name);
  const char* v = std::getenv(env_name);  // the only getenv in umem
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace umem
