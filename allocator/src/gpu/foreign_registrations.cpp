// Note [Foreign registrations] (foreign_registrations.hpp).
#include "umem/allocator/gpu/foreign_registrations.hpp"

#include <unistd.h>

#include <iterator>

#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc {

std::shared_ptr<void> foreign_registrations::acquire(const void* p, std::size_t bytes) {
  const std::string text = detail::range_text(p, bytes);
  if (p == nullptr || bytes == 0)
    throw_error(errc::invalid_argument,
                rt_.who + ": a foreign range needs an address and a size (got " + text + ")");
  if (creator_.is_other())
    throw_error(errc::unsupported, rt_.who + ": " + text +
                                       " cannot be registered in a forked child (the GPU runtime "
                                       "serves only the process that loaded it)");
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = first / page * page;
  const std::uintptr_t hi = (first + bytes + page - 1) / page * page;
  std::lock_guard lock(mutex_);
  std::uintptr_t base = lo;
  // The last of the registrations starting below `hi`.
  if (auto it = ranges_.lower_bound(hi);
      it != ranges_.begin() && std::prev(it)->first + std::prev(it)->second.size > lo) {
    --it;
    if (it->first > lo || it->first + it->second.size < hi)
      throw_error(errc::unsupported, rt_.who + ": " + text +
                                         " overlaps only in part a range umem registered for "
                                         "another alias; the runtime cannot hold two "
                                         "registrations over the same pages");
    ++it->second.uses;
    base = it->first;
  } else {
    const bool first_known = rt_.knows(p);
    const bool last_known = rt_.knows(static_cast<const unsigned char*>(p) + bytes - 1);
    if (first_known && last_known) return nullptr;  // the runtime's own memory (pinned, ...)
    if (first_known || last_known)
      throw_error(errc::unsupported, rt_.who + ": the GPU runtime knows " + text +
                                         " only in part (memory registered or allocated by "
                                         "someone else), so it cannot be registered as a whole");
    rt_.add(reinterpret_cast<void*>(lo), hi - lo);
    ranges_.emplace(lo, range{hi - lo, 1});
  }
  return {reinterpret_cast<void*>(base),
          [self = shared_from_this(), base](void*) { self->release(base); }};
}

void foreign_registrations::release(std::uintptr_t base) noexcept {
  std::lock_guard lock(mutex_);
  auto it = ranges_.find(base);
  if (it == ranges_.end() || --it->second.uses > 0) return;
  if (!creator_.is_other())  // Note [Fork]: a child never registered it
    rt_.remove(reinterpret_cast<void*>(base), it->second.size);
  ranges_.erase(it);
}

}  // namespace umem::alloc
