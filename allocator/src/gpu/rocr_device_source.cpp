#include "umem/allocator/gpu/rocr_device_source.hpp"

#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_handles.hpp"

namespace umem::alloc {
namespace {

namespace rc = hsa::rocr_compat;

// hsa_amd_memory_type_t MEMORY_TYPE_NONE (ROCr >= 6.0): the handle's memory is the pool's own,
// not pinned host memory.
constexpr std::uint32_t vmem_memory_type_none = 0;

void* pointer_of(std::uintptr_t p) { return reinterpret_cast<void*>(p); }

// What a segment handed out records; `reserved` is 0 for a segment that cannot grow.
segment made(void* base, std::size_t size, std::size_t reserved, const node_binding& where,
             coherence kind) {
  segment s;
  s.base = base;
  s.size = size;
  s.binding = where;
  s.kind = kind;
  s.reserved_size = reserved;
  return s;
}

const hsa::rocr_library& library_of(const std::shared_ptr<const hsa::rocr_library>& lib) {
  if (!lib) throw_error(errc::invalid_argument, "rocr_device_source: no ROCr library given");
  return *lib;
}

std::string name_of(const agent& gpu, int device) {
  if (gpu.kind != agent_kind::gpu || gpu.cuda)
    throw_error(errc::invalid_argument, "rocr_device_source: " + gpu.marketing_name +
                                            " is not a GPU agent discovered through ROCr");
  return "ROCr device " + std::to_string(device) + " (" + gpu.marketing_name + ")";
}

// The GPU agent whose DRIVER_NODE_ID is `kfd_node` (as rocr_gpu_mapper matches them).
hsa::rocr_agent find_agent(const hsa::rocr_library& lib, std::uint32_t kfd_node,
                           const std::string& name) {
  for (hsa::rocr_agent h : hsa::agents_of(lib)) {
    std::uint32_t device = 0, node = 0;
    lib.check(lib.fn().hsa_agent_get_info(h, rc::agent_info::device, &device),
              "hsa_agent_get_info(DEVICE)");
    if (device != rc::device_type::gpu) continue;
    lib.check(lib.fn().hsa_agent_get_info(h, rc::agent_info::driver_node_id, &node),
              "hsa_agent_get_info(DRIVER_NODE_ID)");
    if (node == kfd_node) return h;
  }
  throw_error(errc::invalid_argument,
              "rocr_device_source: ROCr (" + lib.resolved_path() +
                  ") has no GPU agent of KFD node " + std::to_string(kfd_node) + " for " + name +
                  "; the topology was not discovered from this runtime");
}

struct vram_pool {
  hsa::rocr_pool handle;
  std::size_t size = 0;
  std::size_t granule = 0;
};

// The agent's first GLOBAL COARSE_GRAINED pool that allows allocation.
std::optional<vram_pool> find_vram_pool(const hsa::rocr_library& lib, hsa::rocr_agent agent) {
  for (hsa::rocr_pool p : hsa::pools_of(lib, agent)) {
    std::uint32_t segment = 0, flags = 0;
    bool allowed = false;
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::segment, &segment),
              "hsa_amd_memory_pool_get_info(SEGMENT)");
    if (segment != static_cast<std::uint32_t>(pool_segment::global)) continue;
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::global_flags, &flags),
              "hsa_amd_memory_pool_get_info(GLOBAL_FLAGS)");
    if ((flags & pool_flag::coarse_grained) == 0) continue;
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::alloc_allowed, &allowed),
              "hsa_amd_memory_pool_get_info(RUNTIME_ALLOC_ALLOWED)");
    if (!allowed) continue;
    vram_pool v{p};
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::size, &v.size),
              "hsa_amd_memory_pool_get_info(SIZE)");
    lib.check(lib.fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::alloc_granule, &v.granule),
              "hsa_amd_memory_pool_get_info(RUNTIME_ALLOC_GRANULE)");
    return v;
  }
  return std::nullopt;
}

}  // namespace

rocr_device_source::rocr_device_source(std::shared_ptr<const hsa::rocr_library> lib,
                                       const agent& gpu, int device, bool hip_loaded)
    : lib_(std::move(lib)), session_(library_of(lib_)), name_(name_of(gpu, device)) {
  agent_ = find_agent(*lib_, gpu.kfd_node, name_);
  const auto pool = find_vram_pool(*lib_, agent_);
  if (!pool)
    throw_error(errc::unsupported, "rocr_device_source: " + name_ + " (KFD node " +
                                       std::to_string(gpu.kfd_node) +
                                       ") has no GLOBAL COARSE_GRAINED pool that allows "
                                       "allocation, so it has no VRAM pool to allocate from");
  pool_ = pool->handle;
  total_ = pool->size;
  granularity_ = pool->granule == 0 ? minimum_granularity
                                    : std::lcm(pool->granule, minimum_granularity);
  std::uint64_t avail = 0;
  const hsa::rocr_status probe =
      lib_->fn().hsa_agent_get_info(agent_, rc::agent_info::memory_avail, &avail);
  memory_avail_ = probe == rc::status::success;
  if (!memory_avail_ && probe != rc::status::invalid_argument)
    lib_->check(probe, "hsa_agent_get_info(MEMORY_AVAIL)");
  vmem_ = lib_->has_vmem() && !hip_loaded;  // Note [Growable ROCr device segments]
  no_growth_ = hip_loaded ? "HIP is loaded and knows no hsa_amd_vmem_* mappings"
                          : "no hsa_amd_vmem_* in this runtime";
  log().debug("rocr_device_source: {}", describe());
}

segment rocr_device_source::allocate(std::size_t bytes, const node_binding& where,
                                     coherence kind) {
  const std::size_t size = rounded(bytes);
  void* p = nullptr;
  check_call("hsa_amd_memory_pool_allocate", size,
             lib_->fn().hsa_amd_memory_pool_allocate(pool_, size, 0, &p));
  held_.fetch_add(size, std::memory_order_relaxed);
  return made(p, size, 0, where, kind);
}

segment rocr_device_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                              const node_binding& where, coherence kind) {
  const std::size_t first = rounded(bytes);
  if (!vmem_ || reserve_bytes <= first) return allocate(bytes, where, kind);
  const std::size_t reserved = rounded(reserve_bytes);
  void* va = nullptr;
  // Aligned to the chunk, so every range starts on a granule (Note [Growable ROCr device
  // segments]).
  check_call("hsa_amd_vmem_address_reserve_align", reserved,
             lib_->fn().hsa_amd_vmem_address_reserve_align(&va, reserved, 0, granularity_, 0));
  reservations_.add(
      reinterpret_cast<std::uintptr_t>(va), reserved, first,
      [&](std::uintptr_t base, std::size_t offset, std::size_t n) {
        return map_range(base, offset, n);
      },
      [&](std::uintptr_t base, const reservation& rec) {
        held_.fetch_sub(rec.mapped_bytes(), std::memory_order_relaxed);
        release(base, rec);
      });
  log().debug("rocr_device_source: {} bytes mapped at {} on {}, {} reserved", first, va, name_,
              reserved);
  return made(va, first, reserved, where, kind);
}

bool rocr_device_source::grow(segment& s, std::size_t extra_bytes) {
  // An hsa_amd_memory_pool_allocate segment is no reservation: false.
  if (!vmem_ ||
      !reservations_.grow(s, extra_bytes, granularity_,
                          [&](std::uintptr_t base, std::size_t offset, std::size_t n) {
                            return map_range(base, offset, n);
                          }))
    return false;
  log().debug("rocr_device_source: the segment at {} on {} is {} bytes", s.base, name_, s.size);
  return true;
}

// Nothing here can wait for the kernels that may still use a free block (see the header).
bool rocr_device_source::decommit(const segment&, void*, std::size_t) { return false; }

std::vector<rocr_device_source::mapped_range> rocr_device_source::map_range(std::uintptr_t base,
                                                                          std::size_t offset,
                                                                          std::size_t size) {
  const hsa::rocr_functions& f = lib_->fn();
  hsa::rocr_vmem_handle handle;
  check_call("hsa_amd_vmem_handle_create", size,
             f.hsa_amd_vmem_handle_create(pool_, size, vmem_memory_type_none, 0, &handle));
  void* at = pointer_of(base + offset);
  const char* failed = "hsa_amd_vmem_map";
  hsa::rocr_status r = f.hsa_amd_vmem_map(at, size, 0, handle, 0);
  if (r == rc::status::success) {
    const hsa::rocr_access_desc access{rc::access_permission::rw, agent_};
    failed = "hsa_amd_vmem_set_access";
    r = f.hsa_amd_vmem_set_access(at, size, &access, 1);
    if (r != rc::status::success)
      log_failure("hsa_amd_vmem_unmap", f.hsa_amd_vmem_unmap(at, size));
  }
  if (r != rc::status::success) {
    log_failure("hsa_amd_vmem_handle_release", f.hsa_amd_vmem_handle_release(handle));
    check_call(failed, size, r);
  }
  held_.fetch_add(size, std::memory_order_relaxed);
  return {mapped_range{offset, size, handle}};
}

// Nothing still runs on the memory: Note [Growable ROCr device segments], "Kernels".
void rocr_device_source::release(std::uintptr_t base, const reservation& r) const noexcept {
  const hsa::rocr_functions& f = lib_->fn();
  for (const auto& [offset, m] : r.ranges) {
    log_failure("hsa_amd_vmem_unmap", f.hsa_amd_vmem_unmap(pointer_of(base + m.offset), m.size));
    log_failure("hsa_amd_vmem_handle_release", f.hsa_amd_vmem_handle_release(m.handle));
  }
  log_failure("hsa_amd_vmem_address_free",
              f.hsa_amd_vmem_address_free(pointer_of(base), r.reserved));
}

void rocr_device_source::deallocate(const segment& s) noexcept {
  if (vmem_) {
    std::optional<reservation> rec;
    try {
      rec = reservations_.take(s);
    } catch (...) {  // the lock failed: the segment is left as it is
      log_failure("locking the reservations in deallocate", rc::status::error);
      return;
    }
    if (rec) {
      release(reinterpret_cast<std::uintptr_t>(s.base), *rec);
      held_.fetch_sub(rec->mapped_bytes(), std::memory_order_relaxed);
      return;
    }
  }
  const hsa::rocr_status r = lib_->fn().hsa_amd_memory_pool_free(s.base);
  if (r == rc::status::success) {
    held_.fetch_sub(s.size, std::memory_order_relaxed);
    return;
  }
  try {
    log().error("rocr_device_source: hsa_amd_memory_pool_free of {} bytes at {} on {} failed: {}",
                s.size, s.base, name_, lib_->status_text(r));
  } catch (...) {  // the message could not be made: the failure stays unreported
  }
}

std::string rocr_device_source::describe() const {
  return name_ + " VRAM pool: hsa_amd_memory_pool_allocate, " +
         std::to_string(granularity_ >> 20) + " MiB granularity, " + std::to_string(total_) +
         " bytes; " +
         (vmem_ ? "growable segments through the virtual memory API (hsa_amd_vmem_*)"
                : "segments do not grow (" + no_growth_ + ")") +
         "; free from " +
         (memory_avail_ ? "MEMORY_AVAIL" : "what this source holds (no MEMORY_AVAIL)") +
         " (ROCr " + lib_->resolved_path() + ")";
}

std::pair<std::uint64_t, std::uint64_t> rocr_device_source::memory_info() const {
  if (!memory_avail_) {
    const std::uint64_t held = held_bytes();
    return {held < total_ ? total_ - held : 0, total_};
  }
  std::uint64_t avail = 0;
  lib_->check(lib_->fn().hsa_agent_get_info(agent_, rc::agent_info::memory_avail, &avail),
              "hsa_agent_get_info(MEMORY_AVAIL)");
  return {avail, total_};
}

std::string rocr_device_source::memory_text() const {
  try {
    const auto [free_bytes, total] = memory_info();
    return std::to_string(free_bytes) + " of " + std::to_string(total) + " bytes free";
  } catch (const error& e) {
    return std::string("free memory unknown: ") + e.what();
  }
}

std::size_t rocr_device_source::rounded(std::size_t bytes) const {
  if (bytes == 0 || bytes > SIZE_MAX - (granularity_ - 1))
    throw_error(errc::invalid_argument, "rocr_device_source: cannot allocate " +
                                            std::to_string(bytes) + " bytes on " + name_);
  return (bytes + granularity_ - 1) / granularity_ * granularity_;
}

void rocr_device_source::check_call(const char* call, std::size_t bytes,
                                    hsa::rocr_status r) const {
  if (r == rc::status::success) return;
  if (r == rc::status::out_of_resources || r == rc::status::invalid_allocation)
    throw_error(errc::out_of_memory, "rocr_device_source: " + name_ + " has no room for " +
                                         std::to_string(bytes) + " bytes: " + call +
                                         " failed: " + lib_->status_text(r) + "; " +
                                         memory_text());
  throw_error(errc::runtime_error, "rocr_device_source: " + std::string(call) + " of " +
                                       std::to_string(bytes) + " bytes on " + name_ +
                                       " failed: " + lib_->status_text(r));
}

// Cleanup calls cannot throw: a failure is logged and the next step still runs.
void rocr_device_source::log_failure(const char* call, hsa::rocr_status r) const noexcept {
  if (r == rc::status::success) return;
  try {
    log().error("rocr_device_source: {} on {} failed: {}", call, name_, lib_->status_text(r));
  } catch (...) {  // the message could not be made: the failure stays unreported
  }
}

}  // namespace umem::alloc
