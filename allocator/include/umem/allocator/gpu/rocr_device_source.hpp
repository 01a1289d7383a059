// A discrete AMD GPU's own memory (MI300X, MI250X: Note [Device memory kinds] in
// machine/gpu_memory_kind.hpp) as an upstream source, from the GPU agent's VRAM pool through ROCr.
//
// The VRAM pool is the GPU agent's GLOBAL COARSE_GRAINED pool that allows allocation (the pool
// hipMalloc takes from). allocate() is hsa_amd_memory_pool_allocate of the request rounded up to
// granularity(): the least common multiple of the pool's allocation granule and 2 MiB (the caching
// pool's small-segment size), 2 MiB on every MI300X. deallocate() is hsa_amd_memory_pool_free.
// The memory is accessible to its own GPU agent only (ROCr's default for a GPU pool; other agents
// would need hsa_amd_agents_allow_access, as peer access does for hipMalloc memory), and the host
// must not touch it. hsa_amd_memory_pool_free does not wait for kernels: the caching pool hands a
// segment back only when every block of it is free, and blocks are free only once their streams
// are done with them (stream events; a sole stream's blocks are waited for before a trim, Note
// [A device's sole stream] in bridge.hpp), so no kernel still uses a segment freed here.
//
// allocate_growable() and grow() use ROCr's virtual memory API where the runtime has it (Note
// [Growable ROCr device segments]), so the pool's expandable segment grows in place instead of
// taking a new segment for every large miss; elsewhere (ROCr < 6.2: rocr_library::has_vmem()
// false) they keep upstream_source's defaults (allocate(); false) and a large miss takes a new
// segment, as before. Nor do they grow in a process that has loaded HIP: HIP knows a pool
// allocation through its arena, but not memory mapped with hsa_amd_vmem_map (ROCr's PtrInfo does
// not report it as an HSA allocation, and clr's IsValidAllocation grants no object to anything
// else: Note [GPU visibility under HIP] in hip_gpu_mapper.hpp), so hipMemcpy and hipMemset would
// refuse a grown segment. decommit() always answers false, so empty_cache returns whole free
// segments only: unmapping a free block's range needs a wait for the kernels that may still use
// it (Note [Giving device pages back] in cuda_device_source.hpp), and this source has no stream or
// signal to wait on. A growth maps one range with one handle.
//
// Note [Growable ROCr device segments]
// Why: without growth every large miss takes a new segment and the cache strands the free tail
// of the last one (Note [Expandable segments] in caching_pool.hpp); CUDA's device source grows
// for the same reason (Note [Growable device segments] in cuda_device_source.hpp). How: a
// growable segment is hsa_amd_vmem_address_reserve_align of reserved_size bytes, aligned to the
// chunk size, whose first `size` bytes are mapped. Each allocate_growable() or grow() maps one
// range: hsa_amd_vmem_handle_create on the VRAM pool (MEMORY_TYPE_NONE), hsa_amd_vmem_map at the
// end of what is mapped, hsa_amd_vmem_set_access read/write for this GPU agent only (as for
// hsa_amd_memory_pool_allocate memory; no peer or host access). A range is a multiple of the
// chunk size, granularity(): ROCr reports no granularity of its own for VMM handles, which must
// be multiples of the pool's RUNTIME_ALLOC_GRANULE. The source keeps every range's handle per
// reservation; deallocate() unmaps and releases each and frees the reservation. A growth that
// fails half way unmaps and releases what it had made, so the reservation is as it was. Plain
// allocate() stays hsa_amd_memory_pool_allocate: one call instead of four.
// Kernels: hsa_amd_vmem_unmap, like hsa_amd_memory_pool_free, is not known to wait for kernels
// still using the range, and this source has no stream or signal to wait on (CUDA's source
// synchronizes its context instead). It relies on the caching pool's contract above: a segment
// comes back only when every block of it is free, and a block is free only once its streams are
// done with it, so nothing still runs on a reservation released here.
//
// memory_info(): total is the VRAM pool's size; free is the agent's HSA_AMD_AGENT_INFO_MEMORY_AVAIL
// (what is left across its GLOBAL pools, which on a discrete GPU are views of the same VRAM; all
// processes counted) where the runtime answers it. ROCr 5.2.3 does not know the attribute (its
// hsa_ext_amd.h ends at 0xA014); there free is total minus what this source holds, so other
// processes' use is not seen.
//
// Out of device memory (HSA_STATUS_ERROR_OUT_OF_RESOURCES or HSA_STATUS_ERROR_INVALID_ALLOCATION
// from hsa_amd_memory_pool_allocate, hsa_amd_vmem_address_reserve_align, _handle_create or _map)
// is umem::error(out_of_memory) naming the device, the request and memory_info's free/total;
// every other failure is runtime_error naming the ROCr call.
//
// Thread safety: everything is looked up once at construction; ROCr's calls are thread-safe and
// the bytes held are an atomic counter, so every member function may be called from any thread.
// One mutex guards the reservations' handles; grow() holds it while it maps, so growths are
// serialized.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "umem/allocator/gpu/growable_reservations.hpp"
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
  // `hip_loaded`: the process has loaded HIP, so segments never grow (see above).
  rocr_device_source(std::shared_ptr<const hsa::rocr_library> lib, const agent& gpu, int device,
                     bool hip_loaded = false);

  // hsa_amd_memory_pool_allocate of `bytes` rounded up to granularity(). Throws umem::error:
  // invalid_argument for 0 or a size that overflows when rounded; out_of_memory; runtime_error.
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  // A reservation of `reserve_bytes` with `bytes` mapped, both rounded up to granularity()
  // (Note [Growable ROCr device segments]); allocate() without the VMM API or when the
  // reservation would be no larger. Throws as allocate() does.
  segment allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                            const node_binding& where, coherence kind) override;
  // Maps `extra_bytes` rounded up to granularity() after what `s` has mapped; false when `s` is
  // not a growable segment of this source or its reservation has no room for that. Throws
  // out_of_memory or runtime_error, leaving `s` and the reservation unchanged.
  bool grow(segment& s, std::size_t extra_bytes) override;
  // Always false (see above).
  bool decommit(const segment& s, void* p, std::size_t bytes) override;
  // Failures are logged (errors), never thrown.
  void deallocate(const segment& s) noexcept override;
  // "ROCr device 1 (AMD Instinct MI300X) VRAM pool: ...".
  std::string describe() const override;
  std::pair<std::uint64_t, std::uint64_t> memory_info() const override;

  std::size_t granularity() const { return granularity_; }
  // Whether segments can grow here (the runtime has the VMM API and HIP is not loaded).
  bool grows() const { return vmem_; }
  // Bytes of the segments this source has handed out and not yet taken back (of a reservation:
  // what is mapped).
  std::uint64_t held_bytes() const { return held_.load(std::memory_order_relaxed); }
  // Whether free comes from MEMORY_AVAIL (else: total minus held_bytes()).
  bool reports_memory_avail() const { return memory_avail_; }

 private:
  using reservation = growable_reservations<hsa::rocr_vmem_handle>::reservation;
  using mapped_range = growable_reservations<hsa::rocr_vmem_handle>::mapped_range;

  // "F of T bytes free" for an out-of-memory message, or why it is not known; never throws
  // umem::error.
  std::string memory_text() const;
  // `bytes` rounded up to granularity(); invalid_argument for 0 or an overflow.
  std::size_t rounded(std::size_t bytes) const;
  // Throws unless `r` is success: out_of_memory for OUT_OF_RESOURCES or INVALID_ALLOCATION,
  // else runtime_error, both naming `call`, `bytes` and the device.
  void check_call(const char* call, std::size_t bytes, hsa::rocr_status r) const;
  // Logs a failed cleanup call; never throws.
  void log_failure(const char* call, hsa::rocr_status r) const noexcept;
  // Handle, map and access for [base + offset, + size), counted in held_; its handle. Undoes what
  // it did and throws on failure.
  std::vector<mapped_range> map_range(std::uintptr_t base, std::size_t offset, std::size_t size);
  // Unmaps and releases every range of `r`, then frees the reservation.
  void release(std::uintptr_t base, const reservation& r) const noexcept;

  std::shared_ptr<const hsa::rocr_library> lib_;
  hsa::rocr_session session_;  // after lib_: closed before the library goes
  std::string name_;           // "ROCr device 1 (AMD Instinct MI300X)"
  hsa::rocr_agent agent_;
  hsa::rocr_pool pool_;
  std::uint64_t total_ = 0;  // the VRAM pool's SIZE
  std::size_t granularity_ = minimum_granularity;
  bool memory_avail_ = false;
  bool vmem_ = false;      // segments grow: rocr_library::has_vmem() and no HIP
  std::string no_growth_;  // why they do not, for describe()
  std::atomic<std::uint64_t> held_{0};  // mapped bytes for reservations

  growable_reservations<hsa::rocr_vmem_handle> reservations_;
};

}  // namespace umem::alloc
