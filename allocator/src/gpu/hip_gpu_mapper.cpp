// Note [GPU visibility under HIP] (hip_gpu_mapper.hpp): segments registered with hipHostRegister.
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"

#include <unistd.h>

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"
#include "umem/hip_runtime/hip_compat.hpp"

namespace umem::alloc {
namespace {

namespace hc = hip::hip_compat;

constexpr unsigned kFlags = hc::host_register::portable | hc::host_register::mapped;

std::string range_text(const void* p, std::size_t bytes) {
  return std::to_string(bytes) + " bytes at " + detail::hex(p);
}

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
  if (device_address(rt, p) != nullptr)
    throw_error(errc::runtime_error,
                "hip_gpu_mapper: HIP already knows " + range_text(p, bytes) +
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
                "hip_gpu_mapper: hipHostRegister of " + range_text(p, bytes) +
                    " failed: " + rt.result_text(r) + " (HIP " + rt.resolved_path() + ")" +
                    (oom ? "; HIP could not pin the pages (out of pinnable memory)" : "") +
                    (unpinnable ? "; HIP could not lock the pages: KFD pins only writable memory "
                                  "that is wholly mapped (not a read-only map)"
                                : ""));
  }
  if (void* d = device_address(rt, p); d != p) {
    const hip::hip_error undo = rt.fn().hipHostUnregister(p);
    throw_error(errc::unsupported,
                "hip_gpu_mapper: HIP registered " + range_text(p, bytes) + " at device address " +
                    detail::hex(d) +
                    ", not at its host address; zero-copy sharing needs one address for "
                    "CPU and GPU. The registration was " +
                    (undo == hc::result::success ? std::string("undone.")
                                                 : "not undone: " + rt.result_text(undo)));
  }
}

void unregister_range(const hip::hip_runtime& rt, void* p, std::size_t bytes) noexcept {
  const hip::hip_error r = rt.fn().hipHostUnregister(p);
  if (r != hc::result::success)
    log().error("hip_gpu_mapper: hipHostUnregister of {} failed: {}", range_text(p, bytes),
                rt.result_text(r));
}

}  // namespace

// Registrations of memory umem did not allocate, page-rounded, counted per range.
struct hip_gpu_mapper::foreign_ranges
    : std::enable_shared_from_this<hip_gpu_mapper::foreign_ranges> {
  struct range {
    std::size_t size = 0;
    long uses = 0;
  };
  std::shared_ptr<const hip::hip_runtime> hip;
  creating_process creator;
  std::mutex mutex;
  std::map<std::uintptr_t, range> ranges;  // by base

  // A handle whose last copy gives up one use of the registration at `base`.
  std::shared_ptr<void> handle(std::uintptr_t base) {
    return {reinterpret_cast<void*>(base),
            [self = shared_from_this(), base](void*) { self->release(base); }};
  }

  void release(std::uintptr_t base) noexcept {
    std::lock_guard lock(mutex);
    auto it = ranges.find(base);
    if (it == ranges.end() || --it->second.uses > 0) return;
    if (!creator.is_other())  // Note [Fork]: a child never registered it
      unregister_range(*hip, reinterpret_cast<void*>(base), it->second.size);
    ranges.erase(it);
  }
};

hip_gpu_mapper::hip_gpu_mapper(std::shared_ptr<const hip::hip_runtime> hip, std::string why)
    : hip_(std::move(hip)), why_(std::move(why)), foreign_(std::make_shared<foreign_ranges>()) {
  if (!hip_) throw_error(errc::invalid_argument, "hip_gpu_mapper: no HIP runtime given");
  foreign_->hip = hip_;
  log().debug("hip_gpu_mapper: {}", describe());
}

hip_gpu_mapper::~hip_gpu_mapper() = default;

void hip_gpu_mapper::map(const segment& s) {
  if (creator_.is_other()) return;  // Note [Fork]: host memory only in a forked child
  if (s.base == nullptr || s.size == 0)
    throw_error(errc::invalid_argument, "hip_gpu_mapper: a segment needs a base and a size (got " +
                                            range_text(s.base, s.size) + ")");
  if (s.kind == coherence::unknown)
    throw_error(errc::invalid_argument,
                "hip_gpu_mapper: segment kind must be fine, coarse or extended_fine");
  if (s.kind == coherence::extended_fine)
    throw_error(errc::unsupported,
                "hip_gpu_mapper: extended_fine memory cannot be made known to HIP: "
                "hipHostRegister locks host memory fine-grained, without system-scope coherence "
                "(Note [GPU visibility under HIP]); ask for fine or coarse memory, or run without "
                "HIP loaded (" +
                    range_text(s.base, s.size) + ")");
  register_range(*hip_, s.base, s.size, /*own_memory=*/true);
}

void hip_gpu_mapper::unmap(const segment& s) noexcept {
  if (creator_.is_other()) return;  // the child never registered its copies of these pages
  unregister_range(*hip_, s.base, s.size);
}

std::shared_ptr<void> hip_gpu_mapper::register_foreign(const void* p, std::size_t bytes) {
  if (p == nullptr || bytes == 0)
    throw_error(errc::invalid_argument,
                "hip_gpu_mapper: a foreign range needs an address and a "
                "size (got " +
                    range_text(p, bytes) + ")");
  if (creator_.is_other())
    throw_error(errc::unsupported, "hip_gpu_mapper: " + range_text(p, bytes) +
                                       " cannot be registered with HIP in a forked child (HIP "
                                       "serves only the process that loaded it)");
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = first / page * page;
  const std::uintptr_t hi = (first + bytes + page - 1) / page * page;
  const std::string text = range_text(p, bytes);
  std::lock_guard lock(foreign_->mutex);
  auto& ranges = foreign_->ranges;
  // The last of our registrations starting below `hi` (they never overlap one another).
  if (auto it = ranges.lower_bound(hi);
      it != ranges.begin() && std::prev(it)->first + std::prev(it)->second.size > lo) {
    --it;
    if (it->first > lo || it->first + it->second.size < hi)
      throw_error(errc::unsupported, "hip_gpu_mapper: " + text +
                                         " overlaps only in part a range umem registered with HIP "
                                         "for another alias; HIP cannot hold two objects over the "
                                         "same pages");
    ++it->second.uses;
    return foreign_->handle(it->first);
  }
  const bool first_known = device_address(*hip_, p) != nullptr;
  const bool last_known =
      device_address(*hip_, static_cast<const unsigned char*>(p) + bytes - 1) != nullptr;
  if (first_known && last_known) return nullptr;  // HIP's own memory (hipHostMalloc, ...)
  if (first_known || last_known)
    throw_error(errc::unsupported, "hip_gpu_mapper: HIP knows " + text +
                                       " only in part (memory registered or allocated by "
                                       "someone else), so it cannot be registered as a whole");
  register_range(*hip_, reinterpret_cast<void*>(lo), hi - lo, /*own_memory=*/false);
  ranges[lo] = {hi - lo, 1};
  return foreign_->handle(lo);
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
