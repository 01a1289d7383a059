// The ROCr runtime (libhsa-runtime64.so.1) as one dlopen'd function table.
//
// Note [One table, filled once]
// umem never links ROCr: Debian's 5.2.3 runtime cannot drive gfx942, the site's ROCm must be
// found at run time, and umem must still run (degraded) where no ROCm exists. UMEM_ROCR_SYMBOLS
// below is the single list of every entry point umem uses, with a required/optional column. A
// missing required symbol fails the load naming the symbol and the library; a missing optional
// one (VMM, dmabuf: ROCr >= 6.0 / 5.6) stays null and clears a capability. After load() the
// table never changes, so it may be read from any thread.
//
// The function types use rocr_* mirrors of the HSA types (declared below) instead of <hsa/hsa.h>,
// which stays private to hsa_runtime/src; rocr_library.cpp checks their layout against the real
// headers. Attributes are uint32_t (see rocr_compat.hpp).
//
// Environment (read through umem::env_value): UMEM_HSA_RUNTIME_LIB, ROCM_PATH.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "umem/core/shared_library.hpp"

namespace umem::hsa {

// ABI mirrors of the HSA types used by the table (layouts checked in rocr_library.cpp).
using rocr_status = std::uint32_t;                 // hsa_status_t
struct rocr_agent { std::uint64_t handle = 0; };   // hsa_agent_t
struct rocr_pool { std::uint64_t handle = 0; };    // hsa_amd_memory_pool_t
struct rocr_isa { std::uint64_t handle = 0; };     // hsa_isa_t
struct rocr_signal { std::uint64_t handle = 0; };  // hsa_signal_t
struct rocr_vmem_handle { std::uint64_t handle = 0; };  // hsa_amd_vmem_alloc_handle_t
struct rocr_svm_attribute {                        // hsa_amd_svm_attribute_pair_t
  std::uint64_t attribute = 0;
  std::uint64_t value = 0;
};
struct rocr_pointer_info {  // hsa_amd_pointer_info_t; set size = sizeof before the call
  std::uint32_t size = sizeof(rocr_pointer_info);
  std::uint32_t type = 0;  // rocr_compat::pointer_type
  void* agent_base_address = nullptr;
  void* host_base_address = nullptr;
  std::size_t size_in_bytes = 0;
  void* user_data = nullptr;
  rocr_agent agent_owner;
  std::uint32_t global_flags = 0;
};
struct rocr_access_desc {  // hsa_amd_memory_access_desc_t (ROCr >= 6.0)
  std::uint32_t permissions = 0;  // rocr_compat::access_permission
  rocr_agent agent;
};
struct rocr_event;  // hsa_amd_event_t: read only the member matching its event_type

using rocr_agent_callback = rocr_status (*)(rocr_agent, void*);
using rocr_pool_callback = rocr_status (*)(rocr_pool, void*);
using rocr_isa_callback = rocr_status (*)(rocr_isa, void*);
using rocr_event_callback = rocr_status (*)(const rocr_event*, void*);

// X(symbol, required|optional, return type, parameter list)
#define UMEM_ROCR_SYMBOLS(X)                                                                      \
  X(hsa_init, required, rocr_status, ())                                                          \
  X(hsa_shut_down, required, rocr_status, ())                                                     \
  X(hsa_status_string, required, rocr_status, (rocr_status, const char**))                        \
  X(hsa_system_get_info, required, rocr_status, (std::uint32_t, void*))                           \
  X(hsa_iterate_agents, required, rocr_status, (rocr_agent_callback, void*))                      \
  X(hsa_agent_get_info, required, rocr_status, (rocr_agent, std::uint32_t, void*))                \
  X(hsa_agent_iterate_isas, required, rocr_status, (rocr_agent, rocr_isa_callback, void*))        \
  X(hsa_isa_get_info_alt, required, rocr_status, (rocr_isa, std::uint32_t, void*))                \
  X(hsa_amd_agent_iterate_memory_pools, required, rocr_status,                                    \
    (rocr_agent, rocr_pool_callback, void*))                                                      \
  X(hsa_amd_memory_pool_get_info, required, rocr_status, (rocr_pool, std::uint32_t, void*))       \
  X(hsa_amd_agent_memory_pool_get_info, required, rocr_status,                                    \
    (rocr_agent, rocr_pool, std::uint32_t, void*))                                                \
  X(hsa_amd_memory_pool_allocate, required, rocr_status,                                          \
    (rocr_pool, std::size_t, std::uint32_t, void**))                                              \
  X(hsa_amd_memory_pool_free, required, rocr_status, (void*))                                     \
  X(hsa_amd_agents_allow_access, required, rocr_status,                                           \
    (std::uint32_t, const rocr_agent*, const std::uint32_t*, const void*))                        \
  X(hsa_amd_memory_lock, required, rocr_status, (void*, std::size_t, rocr_agent*, int, void**))   \
  X(hsa_amd_memory_lock_to_pool, required, rocr_status,                                           \
    (void*, std::size_t, rocr_agent*, int, rocr_pool, std::uint32_t, void**))                     \
  X(hsa_amd_memory_unlock, required, rocr_status, (void*))                                        \
  X(hsa_amd_pointer_info, required, rocr_status,                                                  \
    (const void*, rocr_pointer_info*, void* (*)(std::size_t), std::uint32_t*, rocr_agent**))      \
  X(hsa_amd_svm_attributes_set, required, rocr_status,                                            \
    (void*, std::size_t, rocr_svm_attribute*, std::size_t))                                       \
  X(hsa_amd_svm_attributes_get, required, rocr_status,                                            \
    (void*, std::size_t, rocr_svm_attribute*, std::size_t))                                       \
  X(hsa_amd_memory_async_copy, required, rocr_status,                                             \
    (void*, rocr_agent, const void*, rocr_agent, std::size_t, std::uint32_t, const rocr_signal*,  \
     rocr_signal))                                                                                \
  X(hsa_signal_create, required, rocr_status,                                                     \
    (std::int64_t, std::uint32_t, const rocr_agent*, rocr_signal*))                               \
  X(hsa_signal_destroy, required, rocr_status, (rocr_signal))                                     \
  X(hsa_signal_wait_scacquire, required, std::int64_t,                                            \
    (rocr_signal, std::uint32_t, std::int64_t, std::uint64_t, std::uint32_t))                     \
  X(hsa_amd_register_system_event_handler, required, rocr_status, (rocr_event_callback, void*))   \
  X(hsa_amd_portable_export_dmabuf, optional, rocr_status,                                        \
    (const void*, std::size_t, int*, std::uint64_t*))                                             \
  X(hsa_amd_portable_close_dmabuf, optional, rocr_status, (int))                                  \
  X(hsa_amd_vmem_address_reserve, optional, rocr_status,                                          \
    (void**, std::size_t, std::uint64_t, std::uint64_t))                                          \
  X(hsa_amd_vmem_address_reserve_align, optional, rocr_status,                                    \
    (void**, std::size_t, std::uint64_t, std::uint64_t, std::uint64_t))                           \
  X(hsa_amd_vmem_address_free, optional, rocr_status, (void*, std::size_t))                       \
  X(hsa_amd_vmem_handle_create, optional, rocr_status,                                            \
    (rocr_pool, std::size_t, std::uint32_t, std::uint64_t, rocr_vmem_handle*))                    \
  X(hsa_amd_vmem_handle_release, optional, rocr_status, (rocr_vmem_handle))                       \
  X(hsa_amd_vmem_map, optional, rocr_status,                                                      \
    (void*, std::size_t, std::size_t, rocr_vmem_handle, std::uint64_t))                           \
  X(hsa_amd_vmem_unmap, optional, rocr_status, (void*, std::size_t))                              \
  X(hsa_amd_vmem_set_access, optional, rocr_status,                                               \
    (void*, std::size_t, const rocr_access_desc*, std::size_t))                                   \
  X(hsa_amd_vmem_get_access, optional, rocr_status, (void*, std::uint32_t*, rocr_agent))

// The entry points; null only for a missing optional symbol.
struct rocr_functions {
#define UMEM_ROCR_MEMBER(symbol, need, ret, params) ret(*symbol) params = nullptr;
  UMEM_ROCR_SYMBOLS(UMEM_ROCR_MEMBER)
#undef UMEM_ROCR_MEMBER
};

// Every symbol of the table, in table order.
std::span<const runtime_symbol> rocr_symbols();

class rocr_library {
 public:
  // Loads the first candidate of default_candidates() that dlopens. Throws umem::error:
  // runtime_unavailable listing every path tried with its dlerror when none loads;
  // runtime_error naming the symbol and path when a loaded library lacks a required symbol.
  static rocr_library load();
  // The same with an explicit candidate list (paths or plain sonames), tried in order.
  static rocr_library load_from(std::span<const std::string> candidates);
  // UMEM_HSA_RUNTIME_LIB, $ROCM_PATH/lib/libhsa-runtime64.so.1, /opt/rocm/lib/..., and the plain
  // soname for the ld.so search; duplicates removed.
  static std::vector<std::string> default_candidates();

  rocr_library(rocr_library&& other) noexcept;
  rocr_library& operator=(rocr_library&&) = delete;
  rocr_library(const rocr_library&) = delete;
  rocr_library& operator=(const rocr_library&) = delete;
  ~rocr_library();  // dlclose

  const rocr_functions& fn() const { return fns_; }
  // The candidate that loaded, as given, and the file ld.so actually mapped.
  const std::string& path() const { return path_; }
  const std::string& resolved_path() const { return resolved_path_; }

  // Capabilities from optional symbols.
  bool has_vmem() const;    // every hsa_amd_vmem_* entry point (ROCr >= 6.2 for reserve_align)
  bool has_dmabuf() const;  // hsa_amd_portable_export_dmabuf/close_dmabuf (ROCr >= 5.6)
  // Optional symbols this library lacks, in table order.
  const std::vector<std::string>& missing_optional() const { return missing_; }

  // hsa_status_string's text for `status` ("unknown status" if the runtime has none).
  std::string status_text(rocr_status status) const;
  // Throws umem::error "<symbol> failed: 0x1001 <runtime text>" unless `status` is success or
  // info_break: out_of_memory for HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008), else runtime_error.
  void check(rocr_status status, const char* symbol) const;

 private:
  rocr_library(void* handle, std::string path);

  void* handle_ = nullptr;
  std::string path_;
  std::string resolved_path_;
  rocr_functions fns_;
  std::vector<std::string> missing_;
};

// Owns one hsa_init/hsa_shut_down pair (ROCr reference-counts them). The library must outlive it.
class rocr_session {
 public:
  // Throws umem::error: runtime_unavailable when hsa_init reports no driver (out_of_resources),
  // runtime_error for any other failure.
  explicit rocr_session(const rocr_library& lib);
  // nullopt when hsa_init fails; `init_status` receives its status either way.
  static std::optional<rocr_session> try_open(const rocr_library& lib, rocr_status& init_status);

  rocr_session(rocr_session&& other) noexcept;
  rocr_session& operator=(rocr_session&&) = delete;
  rocr_session(const rocr_session&) = delete;
  rocr_session& operator=(const rocr_session&) = delete;
  ~rocr_session();

  const rocr_library& library() const { return *lib_; }

 private:
  struct opened {};
  rocr_session(const rocr_library& lib, opened);

  const rocr_library* lib_;
};

}  // namespace umem::hsa
