// The PyTorch bridge: one umem allocator serving PyTorch's pluggable-allocator hooks per device
// (each device's memory on its NUMA node), CPU tensors on chosen nodes, stream-ordered reuse,
// per-device statistics with PyTorch's keys, a per-device memory cap, and the GPU-access verdict
// zero-copy aliases rely on. umem_torch.h is its C face; docs/torch-bridge.md its semantics.
//
// Thread safety: every member function may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/torch_bridge/stream_ordered_cache.hpp"

namespace umem::torch_bridge {

// Whether the GPU may touch a host range in place, and why (quoted to users who asked for an
// alias).
struct gpu_access {
  bool accessible = false;
  bool umem_memory = false;  // the range is a live allocation of this bridge
  std::string reason;
};

class bridge {
 public:
  // This machine: live discovery, the selected GPU backend's mapper and stream events.
  // `events` (may be empty) replaces the backend's events (umem_torch_set_event_provider).
  bridge(const alloc::alloc_options& options, event_factory events);
  // Explicit parts (tests): `host_memory_gpu_accessible` says whether memory not from umem is
  // GPU-accessible (XNACK on, pageable memory access); `no_gpu_reason` explains when it is not.
  bridge(std::unique_ptr<alloc::allocator> a, event_factory events, bool host_memory_gpu_accessible,
         std::string no_gpu_reason);
  ~bridge();
  bridge(const bridge&) = delete;
  bridge& operator=(const bridge&) = delete;

  // PyTorch's hooks. Throws umem::error: out_of_memory (the cap, or the node after releasing
  // completed blocks, waiting for pending ones and trimming; the message has the device, node
  // and statistics), invalid_argument (unknown device).
  void* allocate(std::size_t bytes, int device, void* stream);
  // Throws umem::error(invalid_argument) for a pointer that is not a live allocation.
  void deallocate(void* p, int device, void* stream);

  // CPU tensors: `node` >= 0 binds to that node, -1 uses the configured placement.
  void* allocate_host(std::size_t bytes, int node);
  void deallocate_host(void* p);

  std::size_t empty_cache(bool device_synchronized);
  // 0 < fraction <= 1 of the device's NUMA node memory; 0 removes the cap.
  void set_memory_fraction(double fraction, int device);
  // {free, total} bytes (umem_torch.h).
  std::pair<std::uint64_t, std::uint64_t> mem_get_info(int device) const;
  // PyTorch keys for `device`, or all devices and host memory for -1 (see docs/torch-bridge.md).
  std::map<std::string, std::int64_t> memory_stats(int device) const;
  void reset_peak_stats(int device);

  gpu_access access(const void* p, std::size_t bytes) const;
  // The NUMA node device's memory goes to.
  int node_of_device(int device) const;

  alloc::allocator& allocator() { return *alloc_; }
  const alloc::allocator& allocator() const { return *alloc_; }
  std::string describe() const;

 private:
  struct usage {  // one device's (or the host's, key -1) share; guarded by mutex_
    alloc::stat allocated;   // usable bytes handed to PyTorch
    alloc::stat requested;   // bytes PyTorch asked for
    alloc::stat allocation;  // live blocks
    std::int64_t num_ooms = 0;
    std::int64_t num_alloc_retries = 0;
    std::int64_t stream_reuses = 0;
    std::optional<std::uint64_t> cap_bytes;
  };
  alloc::request request_for(int device) const;
  void* allocate_with_retry(std::size_t bytes, const alloc::request& r, usage& u, int device);
  void account_allocate(int device, std::size_t usable, std::size_t requested);
  void account_free(int device, std::size_t usable);

  std::unique_ptr<alloc::allocator> alloc_;
  bool host_memory_gpu_accessible_ = false;
  std::string no_gpu_reason_;
  std::unique_ptr<stream_ordered_cache> cache_;
  mutable std::mutex mutex_;
  std::map<int, usage> usage_;   // by device; -1 for host allocations
  usage total_;                  // every device and the host together (peaks of the sum)
  std::map<const void*, std::size_t> requested_;  // requested bytes of live allocations
};

}  // namespace umem::torch_bridge
