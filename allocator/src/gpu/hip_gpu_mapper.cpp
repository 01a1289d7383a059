// Note [GPU visibility under HIP] (hip_gpu_mapper.hpp): segments registered with hipHostRegister.
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"

#include <cstdint>
#include <memory>
#include <utility>

#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"
#include "umem/hip_runtime/hip_compat.hpp"

namespace umem::alloc {
namespace {

namespace hc = hip::hip_compat;

constexpr unsigned kFlags = hc::host_register::portable | hc::host_register::mapped;

// The device address HIP has for `p`; null when HIP does not know it (hipPointerGetAttributes
// answers hipSuccess with no device pointer in clr, an error in older HIP: both mean unknown).
void* device_address(const hip::hip_runtime& rt, const void* p) {
  hc::pointer_attributes a;
  if (rt.fn().hipPointerGetAttributes(&a, p) != hc::result::success) return nullptr;
  return a.device_pointer;
}

// hipHostRegister of [p, p + bytes), checked: the device address must be `p`. `own_memory`: a
// fresh segment of umem's, where hipErrorInvalidValue can only be a failed lock (Note [GPU
// visibility under HIP]). Throws; leaves nothing registered on failure.
void register_range(const hip::hip_runtime& rt, void* p, std::size_t bytes, bool own_memory) {
  // For foreign memory `p` is the start of a page whose first bytes someone else registered
  // (foreign_registrations asked about the caller's own bytes): known in part, so unsupported
  // and copied (Note [Foreign registrations]); for a fresh segment of umem's, a broken state.
  if (device_address(rt, p) != nullptr)
    throw_error(own_memory ? errc::runtime_error : errc::unsupported,
                "hip_gpu_mapper: HIP already knows " + detail::range_text(p, bytes) +
                    " (someone else registered it); umem does not register memory twice, since "
                    "HIP would keep both registrations pinned");
  const hip::hip_error r = rt.fn().hipHostRegister(p, bytes, kFlags);
  if (r != hc::result::success) {
    const bool oom =
        r == hc::result::out_of_memory || (own_memory && r == hc::result::invalid_value);
    // Someone else's range: a failed lock there is most likely pages KFD cannot pin.
    const bool unpinnable = !own_memory && r == hc::result::invalid_value;
    throw_error(oom ? errc::out_of_memory
                    : unpinnable ? errc::unsupported
                                 : errc::runtime_error,
                "hip_gpu_mapper: hipHostRegister of " + detail::range_text(p, bytes) +
                    " failed: " + rt.result_text(r) + " (HIP " + rt.resolved_path() + ")" +
                    (oom ? "; HIP could not pin the pages (out of pinnable memory)" : "") +
                    (unpinnable ? "; HIP could not lock the pages: KFD pins only writable memory "
                                  "that is wholly mapped (not a read-only map)"
                                : ""));
  }
  if (void* d = device_address(rt, p); d != p) {
    const hip::hip_error undo = rt.fn().hipHostUnregister(p);
    throw_error(errc::unsupported,
                "hip_gpu_mapper: HIP registered " + detail::range_text(p, bytes) +
                    " at device address " + detail::hex(d) +
                    ", not at its host address; zero-copy sharing needs one address for "
                    "CPU and GPU. The registration was " +
                    (undo == hc::result::success ? std::string("undone.")
                                                 : "not undone: " + rt.result_text(undo)));
  }
}

void unregister_range(const hip::hip_runtime& rt, void* p, std::size_t bytes) noexcept {
  const hip::hip_error r = rt.fn().hipHostUnregister(p);
  if (r != hc::result::success)
    log().error("hip_gpu_mapper: hipHostUnregister of {} failed: {}", detail::range_text(p, bytes),
                rt.result_text(r));
}

}  // namespace

hip_gpu_mapper::hip_gpu_mapper(std::shared_ptr<const hip::hip_runtime> hip, std::string why)
    : hip_(std::move(hip)), why_(std::move(why)) {
  if (!hip_) throw_error(errc::invalid_argument, "hip_gpu_mapper: no HIP runtime given");
  // The calls hold the runtime: handles may outlive this mapper.
  foreign_ = std::make_shared<foreign_registrations>(foreign_registrations::runtime{
      "hip_gpu_mapper", [rt = hip_](const void* p) { return device_address(*rt, p) != nullptr; },
      [rt = hip_](void* p, std::size_t n) { register_range(*rt, p, n, /*own_memory=*/false); },
      [rt = hip_](void* p, std::size_t n) { unregister_range(*rt, p, n); }});
  log().debug("hip_gpu_mapper: {}", describe());
}

hip_gpu_mapper::~hip_gpu_mapper() = default;

void hip_gpu_mapper::map(const segment& s) {
  if (creator_.is_other()) return;  // Note [Fork]: host memory only in a forked child
  if (s.base == nullptr || s.size == 0)
    throw_error(errc::invalid_argument, "hip_gpu_mapper: a segment needs a base and a size (got " +
                                            detail::range_text(s.base, s.size) + ")");
  if (s.kind == coherence::unknown)
    throw_error(errc::invalid_argument,
                "hip_gpu_mapper: segment kind must be fine, coarse or extended_fine");
  if (s.kind == coherence::extended_fine)
    throw_error(errc::unsupported,
                "hip_gpu_mapper: extended_fine memory cannot be made known to HIP: "
                "hipHostRegister locks host memory fine-grained, without system-scope coherence "
                "(Note [GPU visibility under HIP]); ask for fine or coarse memory, or run without "
                "HIP loaded (" +
                    detail::range_text(s.base, s.size) + ")");
  register_range(*hip_, s.base, s.size, /*own_memory=*/true);
}

void hip_gpu_mapper::unmap(const segment& s) noexcept {
  if (creator_.is_other()) return;  // the child never registered its copies of these pages
  unregister_range(*hip_, s.base, s.size);
}

std::shared_ptr<void> hip_gpu_mapper::register_foreign(const void* p, std::size_t bytes) {
  return foreign_->acquire(p, bytes);  // Note [Foreign registrations]
}

std::string hip_gpu_mapper::describe() const {
  if (creator_.is_other())
    return "a forked child of the process that loaded HIP (" + hip_->resolved_path() +
           "): segments are host memory only, HIP cannot be used here";
  return why_ +
         ": segments are registered with HIP (hipHostRegister, pinned, every HIP device), "
         "so HIP's copies, fills and pointer queries accept them (HIP " +
         hip_->resolved_path() + ")";
}

}  // namespace umem::alloc
