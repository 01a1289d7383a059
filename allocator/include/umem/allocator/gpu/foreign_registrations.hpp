// Registrations of memory umem did not allocate (gpu_mapper::register_foreign), kept the same way
// by every mapper whose runtime registers host memory (HIP, CUDA).
//
// Note [Foreign registrations]
// A zero-copy alias of another allocator's memory (numpy, a memory map, the shared memory of
// DataLoader workers' batches) registers the page-rounded range with the GPU runtime for the
// alias's life. Ranges are counted: aliases of the same pages (a tensor aliased twice, views of
// one storage) share one registration, which goes with the last handle. A range that overlaps one
// of these only in part, or that the runtime knows only in part (registered or allocated by
// someone else), cannot be registered without a second registration over the same pages (HIP
// would keep both pinned, hip_gpu_mapper.hpp; CUDA refuses it with
// CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), so it is refused (unsupported) and the caller copies
// instead; two small tensors of another allocator that share a page are such a case. A range the
// runtime knows wholly (its own pinned memory) needs nothing. In a forked child nothing is
// registered (refused: GPU runtimes serve only the process that loaded them) and a handle
// released there leaves the parent's registration alone (Note [Fork] in fork_safety.hpp).
//
// Thread safety: every member may be called from any thread; one mutex of its own, which no
// allocation path takes (so it is not locked around fork).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "umem/allocator/fork_safety.hpp"

namespace umem::alloc {

class foreign_registrations : public std::enable_shared_from_this<foreign_registrations> {
 public:
  // What the runtime does, for page-aligned ranges.
  struct runtime {
    std::string who;  // the mapper, in messages ("hip_gpu_mapper")
    std::function<bool(const void*)> knows;  // the runtime has this address already; no throw
    // Registers [p, p + bytes) at its host address, or throws umem::error with the reason.
    std::function<void(void*, std::size_t)> add;
    std::function<void(void*, std::size_t)> remove;  // unregisters; logs failures, no throw
  };
  explicit foreign_registrations(runtime rt) : rt_(std::move(rt)) {}

  // A handle whose last copy gives up this use of the registration covering [p, p + bytes);
  // null when the runtime knows the range already. Made with std::make_shared only. Throws
  // umem::error: invalid_argument for a null or empty range; unsupported as Note [Foreign
  // registrations] says, in a forked child, or when `add` refuses the range.
  std::shared_ptr<void> acquire(const void* p, std::size_t bytes);

 private:
  struct range {
    std::size_t size = 0;
    long uses = 0;
  };
  void release(std::uintptr_t base) noexcept;

  runtime rt_;
  creating_process creator_;
  std::mutex mutex_;
  std::map<std::uintptr_t, range> ranges_;  // by base; they never overlap one another
};

}  // namespace umem::alloc
