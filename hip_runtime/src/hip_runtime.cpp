#include "umem/hip_runtime/hip_runtime.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/options.hpp"
#include "umem/core/shared_library.hpp"
#include "umem/hip_runtime/hip_compat.hpp"

namespace umem::hip {
namespace {

// The sonames of ROCm's HIP runtime: the unversioned development link first (what a program
// built against HIP may have loaded by that name), then ROCm 6, 7 and 5.
constexpr std::array<const char*, 4> kSonames{"libamdhip64.so", "libamdhip64.so.6",
                                              "libamdhip64.so.7", "libamdhip64.so.5"};

constexpr std::array kSymbols{
#define UMEM_HIP_ENTRY(symbol, need, result, params) runtime_symbol{#symbol, symbol_need::need},
    UMEM_HIP_SYMBOLS(UMEM_HIP_ENTRY)
#undef UMEM_HIP_ENTRY
};

const char* const hip_hint =
    "it is not a usable libamdhip64 (point UMEM_HIP_RUNTIME_LIB at the HIP runtime the process "
    "uses)";

}  // namespace

std::span<const runtime_symbol> hip_symbols() { return kSymbols; }

std::vector<std::string> hip_runtime::default_candidates() {
  std::vector<std::string> out;
  if (auto lib = env_value("UMEM_HIP_RUNTIME_LIB")) out.push_back(*lib);
  for (const char* soname : kSonames)
    if (std::find(out.begin(), out.end(), soname) == out.end()) out.emplace_back(soname);
  return out;
}

std::optional<hip_runtime> hip_runtime::find_loaded() {
  auto rt = find_loaded_in(default_candidates());
  if (auto wanted = env_value("UMEM_HIP_RUNTIME_LIB"); wanted && (!rt || rt->path() != *wanted))
    log().warn("UMEM_HIP_RUNTIME_LIB={} is not loaded in this process, and umem never loads HIP "
               "itself; {}",
               *wanted, rt ? "using " + rt->resolved_path() : std::string(kHipNotLoaded));
  return rt;
}

std::optional<hip_runtime> hip_runtime::find_loaded_in(std::span<const std::string> candidates) {
  std::string tried;
  auto opened = find_loaded_library(candidates, &tried);
  if (!opened) {
    log().debug("{}; looked for:{}", kHipNotLoaded, tried);
    return std::nullopt;
  }
  return hip_runtime(*std::move(opened));
}

// A missing required symbol throws from the body: lib_ is built by then and drops the reference.
hip_runtime::hip_runtime(opened_library lib) : lib_(std::move(lib)) {
#define UMEM_HIP_RESOLVE(symbol, need, result, params) \
  lib_.resolve({#symbol, symbol_need::need}, fns_.symbol, "the HIP runtime", hip_hint);
  UMEM_HIP_SYMBOLS(UMEM_HIP_RESOLVE)
#undef UMEM_HIP_RESOLVE
  log().debug("using the HIP runtime already loaded: {} ({})", path(), resolved_path());
}

std::string hip_runtime::result_text(hip_error r) const {
  // HIP answers "hipErrorUnknown" for a code it does not know; never null in practice.
  const char* name = fns_.hipGetErrorName(r);
  const char* text = fns_.hipGetErrorString(r);
  std::string out = name != nullptr ? std::string(name) : "hipError_t " + std::to_string(r);
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

void hip_runtime::check(hip_error r, const char* call) const {
  if (r == hip_compat::result::success) return;
  throw_error(errc::runtime_error, std::string(call) + " failed: " + result_text(r) + " (HIP " +
                                       resolved_path() + ")");
}

}  // namespace umem::hip
