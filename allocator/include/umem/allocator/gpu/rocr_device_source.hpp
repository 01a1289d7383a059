// A discrete AMD GPU's own memory (MI300X, MI250X: Note [Device memory kinds] in
// gpu_memory_kind.hpp) as an upstream source, from the GPU agent's VRAM pool through ROCr.
//
// The VRAM pool is the GPU agent's GLOBAL COARSE_GRAINED pool that allows allocation (the pool
// hipMalloc takes from). allocate() is hsa_amd_memory_pool_allocate of the request rounded up to
// granularity(): the least common multiple of the pool's allocation granule and 2 MiB (the caching
// pool's small-segment size), 2 MiB on every MI300X. deallocate() is hsa_amd_memory_pool_free.
// The memory is accessible to its own GPU agent only (ROCr's default for a GPU pool; other agents
// would need hsa_amd_agents_allow_access, as peer access does for hipMalloc memory), and the host
// must not touch it. hsa_amd_memory_pool_free does not wait for kernels: the caching pool hands a
// segment back only when every block of it is free, and blocks are free only once their streams
// are done with them (stream events), so no kernel still uses a segment freed here.
//
// Segments do not grow: allocate_growable(), grow() and decommit() keep upstream_source's defaults
// (allocate(); false; false), so a large miss of the pool takes a new segment. ROCr >= 6.0 has a
// virtual memory API (hsa_amd_vmem_address_reserve, _handle_create, _map, _set_access; in the
// function table as optional symbols, rocr_library::has_vmem()) that would let a segment grow in
// place as cuda_device_source's does (Note [Growable device segments] in cuda_device_source.hpp);
// that is a follow-up.
//
// memory_info(): total is the VRAM pool's size; free is the agent's HSA_AMD_AGENT_INFO_MEMORY_AVAIL
// (what is left across its GLOBAL pools, which on a discrete GPU are views of the same VRAM; all
// processes counted) where the runtime answers it. ROCr 5.2.3 does not know the attribute (its
// hsa_ext_amd.h ends at 0xA014); there free is total minus what this source holds, so other
// processes' use is not seen.
//
// Out of device memory (HSA_STATUS_ERROR_OUT_OF_RESOURCES or HSA_STATUS_ERROR_INVALID_ALLOCATION
// from hsa_amd_memory_pool_allocate) is umem::error(out_of_memory) naming the device, the request
// and memory_info's free/total; every other failure is runtime_error naming the ROCr call.
//
// Thread safety: everything is looked up once at construction; ROCr's calls are thread-safe and
// the bytes held are an atomic counter, so every member function may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "umem/allocator/source/device_memory_source.hpp"
#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {

class rocr_device_source final : public device_memory_source {
 public:
  static constexpr std::size_t minimum_granularity = std::size_t{2} << 20;

  // `gpu` is GPU `device` of the topology (its index in topology::gpus(), as placements count),
  // discovered through `lib`. Opens a ROCr session for the source's life, finds the runtime agent
  // whose DRIVER_NODE_ID is gpu.kfd_node and its VRAM pool, and asks once whether the runtime
  // answers MEMORY_AVAIL. Throws umem::error: invalid_argument when `gpu` is not a GPU agent or
  // the runtime has no GPU agent of that KFD node; unsupported when the agent has no VRAM pool;
  // runtime_unavailable or runtime_error when hsa_init or a query fails.
  rocr_device_source(std::shared_ptr<const hsa::rocr_library> lib, const agent& gpu, int device);

  // hsa_amd_memory_pool_allocate of `bytes` rounded up to granularity(). Throws umem::error:
  // invalid_argument for 0 or a size that overflows when rounded; out_of_memory; runtime_error.
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  // Failures are logged (errors), never thrown.
  void deallocate(const segment& s) noexcept override;
  // "ROCr device 1 (AMD Instinct MI300X) VRAM pool: ...".
  std::string describe() const override;
  std::pair<std::uint64_t, std::uint64_t> memory_info() const override;

  std::size_t granularity() const { return granularity_; }
  // Bytes of the segments this source has handed out and not yet taken back.
  std::uint64_t held_bytes() const { return held_.load(std::memory_order_relaxed); }
  // Whether free comes from MEMORY_AVAIL (else: total minus held_bytes()).
  bool reports_memory_avail() const { return memory_avail_; }

 private:
  // "F of T bytes free" for an out-of-memory message, or why it is not known; never throws
  // umem::error.
  std::string memory_text() const;

  std::shared_ptr<const hsa::rocr_library> lib_;
  hsa::rocr_session session_;  // after lib_: closed before the library goes
  std::string name_;           // "ROCr device 1 (AMD Instinct MI300X)"
  hsa::rocr_agent agent_;
  hsa::rocr_pool pool_;
  std::uint64_t total_ = 0;  // the VRAM pool's SIZE
  std::size_t granularity_ = minimum_granularity;
  bool memory_avail_ = false;
  std::atomic<std::uint64_t> held_{0};
};

}  // namespace umem::alloc
