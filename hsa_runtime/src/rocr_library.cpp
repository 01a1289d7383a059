#include "umem/hsa_runtime/rocr_library.hpp"

#include <dlfcn.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <type_traits>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/shared_library.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/detail/signature_mirror.hpp"
#include "umem/core/options.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

namespace umem::detail {
template <> struct mirror<hsa_status_t> { using type = hsa::rocr_status; };
template <> struct mirror<hsa_agent_t> { using type = hsa::rocr_agent; };
template <> struct mirror<hsa_amd_memory_pool_t> { using type = hsa::rocr_pool; };
template <> struct mirror<hsa_isa_t> { using type = hsa::rocr_isa; };
template <> struct mirror<hsa_signal_t> { using type = hsa::rocr_signal; };
template <> struct mirror<hsa_amd_svm_attribute_pair_t> { using type = hsa::rocr_svm_attribute; };
template <> struct mirror<hsa_amd_pointer_info_t> { using type = hsa::rocr_pointer_info; };
template <> struct mirror<hsa_amd_event_t> { using type = hsa::rocr_event; };
template <> struct mirror<hsa_system_info_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_agent_info_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_isa_info_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_amd_memory_pool_info_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_amd_agent_memory_pool_info_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_signal_condition_t> { using type = std::uint32_t; };
template <> struct mirror<hsa_wait_state_t> { using type = std::uint32_t; };
}  // namespace umem::detail

namespace umem::hsa {
namespace {

constexpr const char* kSoname = "libhsa-runtime64.so.1";
const char* const rocr_hint =
    "it is not a usable libhsa-runtime64 (set UMEM_HSA_RUNTIME_LIB to another one)";

// Note [Checking the mirrors against the real headers]
// mirror<T> (signature_mirror.hpp, specialized above) maps each HSA type of a declaration in
// <hsa/hsa.h> to the rocr_* type the table uses, so every symbol the installed headers declare is
// checked to have exactly the signature the table calls it with. Optional symbols are newer than
// Debian's 5.2.3 headers and are checked by review against ROCr's 2025 headers instead.
using umem::detail::mirror_t;

#define UMEM_ROCR_CHECK_required(symbol)                                                  \
  static_assert(std::is_same_v<mirror_t<decltype(&::symbol)>, decltype(rocr_functions::symbol)>, \
                "table signature of " #symbol " differs from <hsa/hsa.h>");
#define UMEM_ROCR_CHECK_optional(symbol)
#define UMEM_ROCR_CHECK(symbol, need, ret, params) UMEM_ROCR_CHECK_##need(symbol)
UMEM_ROCR_SYMBOLS(UMEM_ROCR_CHECK)
#undef UMEM_ROCR_CHECK
#undef UMEM_ROCR_CHECK_optional
#undef UMEM_ROCR_CHECK_required

template <class Hsa, class Mirror> constexpr bool same_layout() {
  return sizeof(Hsa) == sizeof(Mirror) && alignof(Hsa) == alignof(Mirror);
}
static_assert(sizeof(hsa_status_t) == sizeof(rocr_status));
static_assert(sizeof(hsa_agent_info_t) == sizeof(std::uint32_t));
static_assert(same_layout<hsa_agent_t, rocr_agent>());
static_assert(same_layout<hsa_amd_memory_pool_t, rocr_pool>());
static_assert(same_layout<hsa_isa_t, rocr_isa>());
static_assert(same_layout<hsa_signal_t, rocr_signal>());
static_assert(same_layout<hsa_amd_svm_attribute_pair_t, rocr_svm_attribute>());
static_assert(same_layout<hsa_amd_pointer_info_t, rocr_pointer_info>());
static_assert(offsetof(hsa_amd_pointer_info_t, sizeInBytes) ==
              offsetof(rocr_pointer_info, size_in_bytes));
static_assert(offsetof(hsa_amd_pointer_info_t, agentOwner) ==
              offsetof(rocr_pointer_info, agent_owner));
static_assert(offsetof(hsa_amd_pointer_info_t, global_flags) ==
              offsetof(rocr_pointer_info, global_flags));

constexpr std::array kSymbols{
#define UMEM_ROCR_ENTRY(symbol, need, ret, params) runtime_symbol{#symbol, symbol_need::need},
    UMEM_ROCR_SYMBOLS(UMEM_ROCR_ENTRY)
#undef UMEM_ROCR_ENTRY
};

std::string hex_status(rocr_status status) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", status);
  return buf;
}

}  // namespace

std::span<const runtime_symbol> rocr_symbols() { return kSymbols; }

std::vector<std::string> rocr_library::default_candidates() {
  std::vector<std::string> out;
  auto add = [&out](const std::string& c) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  if (auto lib = env_value("UMEM_HSA_RUNTIME_LIB")) add(*lib);
  if (auto prefix = env_value("ROCM_PATH"))
    add((std::filesystem::path(*prefix) / "lib" / kSoname).lexically_normal().string());
  add(std::string("/opt/rocm/lib/") + kSoname);
  add(kSoname);
  return out;
}

rocr_library rocr_library::load() {
  rocr_library lib = load_from(default_candidates());
  // Falling past /opt/rocm is ordinary; falling past an explicit override is worth a warning.
  if (auto wanted = env_value("UMEM_HSA_RUNTIME_LIB"); wanted && lib.path() != *wanted)
    log().warn("UMEM_HSA_RUNTIME_LIB={} could not be loaded (UMEM_LOG_LEVEL=debug says why); "
               "using {}",
               *wanted, lib.resolved_path());
  return lib;
}

rocr_library rocr_library::load_from(std::span<const std::string> candidates) {
  auto opened = open_first_library(
      candidates, std::string("the ROCm runtime (") + kSoname + ")",
      "Install ROCm, or point UMEM_HSA_RUNTIME_LIB at libhsa-runtime64.so.1 (or ROCM_PATH at the "
      "ROCm prefix).");
  return rocr_library(opened.handle, std::move(opened.path));
}

rocr_library::rocr_library(void* handle, std::string path)
    : handle_(handle), path_(std::move(path)), resolved_path_(path_) {
  resolved_path_ = mapped_path_of(handle_, path_);
  try {
#define UMEM_ROCR_RESOLVE(symbol, need, ret, params)                                        \
  if (!resolve_symbol(handle_, {#symbol, symbol_need::need}, fns_.symbol, "the ROCm runtime", \
                      resolved_path_, rocr_hint))                                            \
    missing_.emplace_back(#symbol);
    UMEM_ROCR_SYMBOLS(UMEM_ROCR_RESOLVE)
#undef UMEM_ROCR_RESOLVE
  } catch (...) {
    dlclose(handle_);
    throw;
  }
  log().debug("loaded the ROCm runtime {} ({}); {} optional symbols missing", path_,
              resolved_path_, missing_.size());
}

rocr_library::rocr_library(rocr_library&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      resolved_path_(std::move(other.resolved_path_)),
      fns_(std::exchange(other.fns_, rocr_functions{})),
      missing_(std::move(other.missing_)) {}

rocr_library::~rocr_library() {
  if (handle_ != nullptr) dlclose(handle_);
}

bool rocr_library::has_vmem() const {
  return fns_.hsa_amd_vmem_address_reserve && fns_.hsa_amd_vmem_address_reserve_align &&
         fns_.hsa_amd_vmem_address_free && fns_.hsa_amd_vmem_handle_create &&
         fns_.hsa_amd_vmem_handle_release && fns_.hsa_amd_vmem_map && fns_.hsa_amd_vmem_unmap &&
         fns_.hsa_amd_vmem_set_access && fns_.hsa_amd_vmem_get_access;
}

bool rocr_library::has_dmabuf() const {
  return fns_.hsa_amd_portable_export_dmabuf && fns_.hsa_amd_portable_close_dmabuf;
}

std::string rocr_library::status_text(rocr_status status) const {
  const char* text = nullptr;
  if (fns_.hsa_status_string(status, &text) != rocr_compat::status::success || text == nullptr)
    return "unknown status";
  return text;
}

void rocr_library::check(rocr_status status, const char* symbol) const {
  if (status == rocr_compat::status::success || status == rocr_compat::status::info_break) return;
  // ROCr's answer when it cannot allocate, lock or map more memory (hsa_init's no-driver case
  // is told apart by rocr_session before it gets here).
  throw_error(status == rocr_compat::status::out_of_resources ? errc::out_of_memory
                                                              : errc::runtime_error, std::string(symbol) + " failed: " + hex_status(status) + " " +
                                       status_text(status) + " (runtime " + resolved_path_ + ")");
}

rocr_session::rocr_session(const rocr_library& lib) : lib_(&lib) {
  const rocr_status status = lib.fn().hsa_init();
  if (status == rocr_compat::status::success) return;
  if (status == rocr_compat::status::out_of_resources)
    throw_error(errc::runtime_unavailable,
                "hsa_init failed: " + hex_status(status) + " " + lib.status_text(status) +
                    " ROCr reports this when there is no AMD GPU driver (/dev/kfd).");
  lib.check(status, "hsa_init");
}

std::optional<rocr_session> rocr_session::try_open(const rocr_library& lib,
                                                   rocr_status& init_status) {
  init_status = lib.fn().hsa_init();
  if (init_status != rocr_compat::status::success) return std::nullopt;
  return rocr_session(lib, opened{});
}

rocr_session::rocr_session(const rocr_library& lib, opened) : lib_(&lib) {}

rocr_session::rocr_session(rocr_session&& other) noexcept
    : lib_(std::exchange(other.lib_, nullptr)) {}

rocr_session::~rocr_session() {
  if (lib_ == nullptr) return;
  if (const rocr_status s = lib_->fn().hsa_shut_down(); s != rocr_compat::status::success)
    log().debug("hsa_shut_down returned {}", hex_status(s));
}

}  // namespace umem::hsa
