#include "umem/allocator/gpu/cuda_device_source.hpp"

#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"

namespace umem::alloc {
namespace {

namespace cc = cuda::cuda_compat;

int ordinal_of(const agent& gpu) {
  if (!gpu.cuda)
    throw_error(errc::invalid_argument, "cuda_device_source: " + gpu.marketing_name +
                                            " is not a GPU discovered through the CUDA driver");
  return static_cast<int>(gpu.cuda->ordinal);
}

cuda::cu_deviceptr device_address(const void* p) {
  return static_cast<cuda::cu_deviceptr>(reinterpret_cast<std::uintptr_t>(p));
}

void* pointer_of(cuda::cu_deviceptr p) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
}

// Pinned memory of device `ordinal`, not exportable: what every mapped range is made of.
cuda::cu_mem_allocation_prop device_memory(int ordinal) {
  cuda::cu_mem_allocation_prop p;
  p.type = cc::vmm::allocation_type_pinned;
  p.requested_handle_types = cc::vmm::handle_type_none;
  p.location = {cc::vmm::location_type_device, ordinal};
  return p;
}

}  // namespace

cuda_device_source::cuda_device_source(std::shared_ptr<const cuda::cuda_driver> drv,
                                       const agent& gpu)
    : drv_(std::move(drv)),
      ctx_(*drv_, ordinal_of(gpu)),
      name_("CUDA device " + std::to_string(gpu.cuda->ordinal) + " (" + gpu.marketing_name +
            ")"),
      chunk_(vmm_chunk()) {}

// Note [Growable device segments]: the chunk size, or 0 when segments cannot grow here.
std::size_t cuda_device_source::vmm_chunk() const {
  if (!drv_->has_virtual_memory()) {
    log().debug("cuda_device_source: the CUDA driver {} lacks the virtual memory API; segments "
                "of {} do not grow",
                drv_->resolved_path(), name_);
    return 0;
  }
  const cuda::cuda_functions& f = drv_->fn();
  cuda::cu_device dev = 0;
  int supported = 0;
  if (f.cuDeviceGet(&dev, ctx_.ordinal()) != 0 ||
      f.cuDeviceGetAttribute(&supported, cc::attribute::virtual_memory_management_supported,
                             dev) != 0 ||
      supported == 0) {
    log().debug("cuda_device_source: {} does not support virtual memory management; its "
                "segments do not grow",
                name_);
    return 0;
  }
  const cuda::cu_mem_allocation_prop prop = device_memory(ctx_.ordinal());
  std::size_t minimum = 0;
  if (const cuda::cu_result r =
          f.cuMemGetAllocationGranularity(&minimum, &prop, cc::vmm::granularity_minimum);
      r != 0 || minimum == 0) {
    log().warn("cuda_device_source: cuMemGetAllocationGranularity for {} failed ({}); its "
               "segments do not grow",
               name_, r != 0 ? drv_->result_text(r) : "granularity 0");
    return 0;
  }
  return std::lcm(minimum, granularity);
}

segment cuda_device_source::allocate(std::size_t bytes, const node_binding& where,
                                     coherence kind) {
  const std::size_t rounded = rounded_request(bytes, granularity);
  const cuda::cuda_context_scope scope(ctx_);
  cuda::cu_deviceptr p = 0;
  check_call("cuMemAlloc", rounded, drv_->fn().cuMemAlloc_v2(&p, rounded));
  segment s;
  s.base = pointer_of(p);
  s.size = rounded;
  s.binding = where;
  s.kind = kind;
  return s;
}

segment cuda_device_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                              const node_binding& where, coherence kind) {
  if (chunk_ == 0) return allocate(bytes, where, kind);
  const std::size_t size = rounded_request(bytes, chunk_);
  if (reserve_bytes <= size) return allocate(bytes, where, kind);
  const std::size_t reserved = rounded_request(reserve_bytes, chunk_);
  const cuda::cuda_functions& f = drv_->fn();
  const cuda::cuda_context_scope scope(ctx_);
  cuda::cu_deviceptr base = 0;
  check_call("cuMemAddressReserve", reserved, f.cuMemAddressReserve(&base, reserved, 0, 0, 0));
  reservations_.add(
      base, reserved, size,
      [&](std::uintptr_t at, std::size_t offset, std::size_t n) {
        return map_range(at, offset, n);
      },
      [&](std::uintptr_t at, const reservation& r) { release_reservation(at, r); });
  log().debug("cuda_device_source: {} bytes mapped at {} on {}, {} reserved", size,
              pointer_of(base), name_, reserved);
  segment s;
  s.base = pointer_of(base);
  s.size = size;
  s.binding = where;
  s.kind = kind;
  s.reserved_size = reserved;
  return s;
}

bool cuda_device_source::grow(segment& s, std::size_t extra_bytes) {
  // A cuMemAlloc segment is no reservation: false.
  if (chunk_ == 0 ||
      !reservations_.grow(s, extra_bytes, chunk_,
                          [&](std::uintptr_t at, std::size_t offset, std::size_t n) {
                            const cuda::cuda_context_scope scope(ctx_);
                            return map_range(at, offset, n);
                          }))
    return false;
  log().debug("cuda_device_source: the segment at {} on {} is {} bytes", s.base, name_, s.size);
  return true;
}

// Note [Giving device pages back]
bool cuda_device_source::decommit(const segment& s, void* p, std::size_t bytes) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto base = reinterpret_cast<std::uintptr_t>(s.base);
  if (chunk_ == 0 || at < base || (at - base) % chunk_ != 0 || bytes % chunk_ != 0) return false;
  const cuda::cuda_context_scope scope(ctx_);
  bool synchronized = false;
  return reservations_.decommit(s, at - base, bytes,
                                [&](std::uintptr_t b, const mapped_range& m) {
                                  // Kernels may still use memory freed on their stream.
                                  if (!synchronized)
                                    log_failure("cuCtxSynchronize", drv_->fn().cuCtxSynchronize());
                                  synchronized = true;
                                  unmap_range(b, m);
                                });
}

void cuda_device_source::recommit(const segment& s, void* p, std::size_t bytes) {
  if (chunk_ == 0) return;
  const cuda::cuda_context_scope scope(ctx_);
  reservations_.recommit(s, reinterpret_cast<std::uintptr_t>(p) -
                                reinterpret_cast<std::uintptr_t>(s.base),
                         bytes, [&](std::uintptr_t at, std::size_t offset, std::size_t n) {
                           return map_range(at, offset, n);
                         });
}

// [base + offset, base + offset + size) as one handle per chunk (cuMemCreate + cuMemMap each),
// then cuMemSetAccess over all of it; on failure undoes what it did and throws (check_call).
std::vector<cuda_device_source::mapped_range> cuda_device_source::map_range(
    cuda::cu_deviceptr base, std::size_t offset, std::size_t size) const {
  const cuda::cuda_functions& f = drv_->fn();
  const cuda::cu_mem_allocation_prop prop = device_memory(ctx_.ordinal());
  std::vector<mapped_range> made;
  made.reserve(size / chunk_);
  auto undo = [&] {
    for (const mapped_range& m : made) unmap_range(base, m);
  };
  for (std::size_t at = offset; at < offset + size; at += chunk_) {
    cuda::cu_mem_handle handle = 0;
    if (const cuda::cu_result r = f.cuMemCreate(&handle, chunk_, &prop, 0); r != 0) {
      undo();
      check_call("cuMemCreate", size, r);
    }
    if (const cuda::cu_result r = f.cuMemMap(base + at, chunk_, 0, handle, 0); r != 0) {
      log_failure("cuMemRelease", f.cuMemRelease(handle));
      undo();
      check_call("cuMemMap", size, r);
    }
    made.push_back({at, chunk_, handle});
  }
  const cuda::cu_mem_access_desc access{{cc::vmm::location_type_device, ctx_.ordinal()},
                                        cc::vmm::access_read_write};
  if (const cuda::cu_result r = f.cuMemSetAccess(base + offset, size, &access, 1); r != 0) {
    undo();
    check_call("cuMemSetAccess", size, r);
  }
  return made;
}

void cuda_device_source::unmap_range(cuda::cu_deviceptr base, const mapped_range& m) const noexcept {
  log_failure("cuMemUnmap", drv_->fn().cuMemUnmap(base + m.offset, m.size));
  log_failure("cuMemRelease", drv_->fn().cuMemRelease(m.handle));
}

// Unmaps and releases every range of `r`, then frees its address space; the context is current.
void cuda_device_source::release_reservation(cuda::cu_deviceptr base,
                                             const reservation& r) const noexcept {
  for (const auto& [offset, m] : r.ranges) unmap_range(base, m);
  log_failure("cuMemAddressFree", drv_->fn().cuMemAddressFree(base, r.reserved));
}

void cuda_device_source::deallocate(const segment& s) noexcept {
  try {
    const std::optional<reservation> rec = reservations_.take(s);
    const cuda::cuda_context_scope scope(ctx_);
    if (rec) {
      // Kernels may still use the memory (Note [Growable device segments]).
      log_failure("cuCtxSynchronize", drv_->fn().cuCtxSynchronize());
      release_reservation(device_address(s.base), *rec);
      return;
    }
    if (const cuda::cu_result r = drv_->fn().cuMemFree_v2(device_address(s.base)); r != 0)
      log().error("cuda_device_source: cuMemFree of {} bytes at {} on {} failed: {}", s.size,
                  s.base, name_, drv_->result_text(r));
  } catch (const std::exception& e) {
    log().error("cuda_device_source::deallocate on {}: {}", name_, e.what());
  }
}

std::string cuda_device_source::describe() const {
  std::string d = name_ + " memory: cuMemAlloc in its primary context, 2 MiB segments; ";
  d += chunk_ != 0 ? "growable segments through the virtual memory API (cuMemCreate/cuMemMap, " +
                         std::to_string(chunk_ >> 20) + " MiB chunks)"
                   : "segments do not grow (no virtual memory management)";
  return d + " (CUDA driver " + drv_->resolved_path() + ")";
}

std::pair<std::uint64_t, std::uint64_t> cuda_device_source::memory_info() const {
  const cuda::cuda_context_scope scope(ctx_);
  std::size_t free_bytes = 0, total = 0;
  drv_->check(drv_->fn().cuMemGetInfo_v2(&free_bytes, &total), "cuMemGetInfo");
  return {free_bytes, total};
}

std::size_t cuda_device_source::rounded_request(std::size_t bytes, std::size_t unit) const {
  if (bytes == 0 || bytes > SIZE_MAX - (unit - 1))
    throw_error(errc::invalid_argument, "cuda_device_source: cannot allocate " +
                                            std::to_string(bytes) + " bytes on " + name_);
  return (bytes + unit - 1) / unit * unit;
}

// Throws for a failed `call` of `bytes`; the primary context is current (cuMemGetInfo).
void cuda_device_source::check_call(const char* call, std::size_t bytes, cuda::cu_result r) const {
  if (r == 0) return;
  if (r == cc::result::out_of_memory) {
    std::size_t free_bytes = 0, total = 0;
    const cuda::cu_result info = drv_->fn().cuMemGetInfo_v2(&free_bytes, &total);
    throw_error(errc::out_of_memory,
                "cuda_device_source: " + name_ + " has no room for " + std::to_string(bytes) +
                    " bytes: " + call + " failed: " + drv_->result_text(r) + "; " +
                    (info == 0 ? "cuMemGetInfo: " + std::to_string(free_bytes) + " of " +
                                     std::to_string(total) + " bytes free"
                               : "cuMemGetInfo failed too: " + drv_->result_text(info)));
  }
  throw_error(errc::runtime_error, "cuda_device_source: " + std::string(call) + " of " +
                                       std::to_string(bytes) + " bytes on " + name_ +
                                       " failed: " + drv_->result_text(r));
}

// Cleanup calls cannot throw: a failure is logged and the next step still runs.
void cuda_device_source::log_failure(const char* call, cuda::cu_result r) const noexcept {
  if (r == 0) return;
  try {
    log().error("cuda_device_source: {} on {} failed: {}", call, name_, drv_->result_text(r));
  } catch (...) {  // the message could not be made: the failure stays unreported
  }
}

}  // namespace umem::alloc
