#include "umem/cuda_runtime/cuda_driver.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/core/shared_library.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/options.hpp"

namespace umem::cuda {
namespace {

constexpr const char* kSoname = "libcuda.so.1";

constexpr std::array kSymbols{
#define UMEM_CUDA_ENTRY(symbol, need, params) runtime_symbol{#symbol, symbol_need::need},
    UMEM_CUDA_SYMBOLS(UMEM_CUDA_ENTRY)
#undef UMEM_CUDA_ENTRY
};

const char* const cuda_hint =
    "it is not a usable libcuda.so.1 (set UMEM_CUDA_DRIVER_LIB to another one, or update the "
    "NVIDIA driver)";

}  // namespace

std::span<const runtime_symbol> cuda_symbols() { return kSymbols; }

std::vector<std::string> cuda_driver::default_candidates() {
  std::vector<std::string> out;
  if (auto lib = env_value("UMEM_CUDA_DRIVER_LIB")) out.push_back(*lib);
  if (std::find(out.begin(), out.end(), kSoname) == out.end()) out.emplace_back(kSoname);
  return out;
}

cuda_driver cuda_driver::load() {
  cuda_driver drv = load_from(default_candidates());
  if (auto wanted = env_value("UMEM_CUDA_DRIVER_LIB"); wanted && drv.path() != *wanted)
    log().warn("UMEM_CUDA_DRIVER_LIB={} could not be loaded (UMEM_LOG_LEVEL=debug says why); "
               "using {}",
               *wanted, drv.resolved_path());
  return drv;
}

cuda_driver cuda_driver::load_from(std::span<const std::string> candidates) {
  auto opened = open_first_library(
      candidates, std::string("the CUDA driver (") + kSoname + ")",
      "Install the NVIDIA driver, or point UMEM_CUDA_DRIVER_LIB at libcuda.so.1.");
  return cuda_driver(opened.handle, std::move(opened.path));
}

cuda_driver::cuda_driver(void* handle, std::string path)
    : handle_(handle), path_(std::move(path)), resolved_path_(path_) {
  resolved_path_ = mapped_path_of(handle_, path_);
  try {
#define UMEM_CUDA_RESOLVE(symbol, need, params)                                                \
  resolve_symbol(handle_, {#symbol, symbol_need::need}, fns_.symbol, "the CUDA driver",        \
                 resolved_path_, cuda_hint);
    UMEM_CUDA_SYMBOLS(UMEM_CUDA_RESOLVE)
#undef UMEM_CUDA_RESOLVE
  } catch (...) {
    dlclose(handle_);
    throw;
  }
  log().debug("loaded the CUDA driver {} ({})", path_, resolved_path_);
}

cuda_driver::cuda_driver(cuda_driver&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      resolved_path_(std::move(other.resolved_path_)),
      fns_(std::exchange(other.fns_, cuda_functions{})) {}

cuda_driver::~cuda_driver() {
  if (handle_ != nullptr) dlclose(handle_);
}

bool cuda_driver::has_virtual_memory() const {
  return fns_.cuMemGetAllocationGranularity != nullptr && fns_.cuMemAddressReserve != nullptr &&
         fns_.cuMemAddressFree != nullptr && fns_.cuMemCreate != nullptr &&
         fns_.cuMemRelease != nullptr && fns_.cuMemMap != nullptr && fns_.cuMemUnmap != nullptr &&
         fns_.cuMemSetAccess != nullptr;
}

std::string cuda_driver::result_text(cu_result r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  // Both answer CUDA_ERROR_INVALID_VALUE for a code the driver does not know.
  const bool named = fns_.cuGetErrorName(r, &name) == 0 && name != nullptr;
  const bool described = fns_.cuGetErrorString(r, &text) == 0 && text != nullptr;
  std::string out = named ? std::string(name) : "CUresult " + std::to_string(r);
  if (described) out += std::string(" (") + text + ")";
  return out;
}

void cuda_driver::check(cu_result r, const char* call) const {
  if (r == 0) return;
  throw_error(r == cuda_compat::result::out_of_memory ? errc::out_of_memory : errc::runtime_error,
              std::string(call) + " failed: " + result_text(r) +
                                       " (driver " + resolved_path_ + ")");
}

}  // namespace umem::cuda
