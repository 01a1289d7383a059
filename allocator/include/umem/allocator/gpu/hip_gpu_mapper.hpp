// Making host memory usable through HIP, in a process that has loaded the HIP runtime (PyTorch
// for ROCm; a HIP program using umem's C or C++ API): every segment is registered in HIP's own
// registry of memory objects with hipHostRegister.
//
// Note [GPU visibility under HIP]
// Why: HIP resolves every pointer of hipMemcpy(Async), hipMemset(Async), hipPointerGetAttributes
// and hipHostGetDevicePointer with hip::getMemoryObject (clr hipamd/src/hip_memory.cpp): its
// MemObjMap first, then the "arena" object, which roc::Device::IsValidAllocation
// (rocclr/device/rocm/rocdevice.cpp) grants only to ROCr pool allocations, never to
// HSA_EXT_POINTER_TYPE_LOCKED ("Return false for pinned memory") nor UNKNOWN ones. Memory that
// ROCr alone made GPU-accessible (hsa_amd_memory_lock_to_pool, XNACK off; hsa_amd_svm_attributes
// _set, XNACK on: rocr_gpu_mapper.hpp) has no object, so hipMemset answers hipErrorInvalidValue
// (ihipMemset_validate), and so does hipMemcpy between two such pointers with XNACK off
// (IsHtoHMemcpyValid); with XNACK on that copy becomes stream.finish() and a CPU memcpy. PyTorch
// for ROCm copies tensors with hipMemcpyAsync and fills them with hipMemsetAsync
// (aten/src/ATen/native/cuda/Copy.cu, hipified), and RCCL, like NCCL's CudaPtrCheck, refuses a
// buffer whose hipPointerGetAttributes has no device pointer.
// How: map() is hipHostRegister(base, size, hipHostRegisterPortable | hipHostRegisterMapped).
// clr's ihipHostRegister creates a CL_MEM_USE_HOST_PTR buffer whose device side
// (roc::Buffer::create, rocclr/device/rocm/rocmemory.cpp) calls hsa_amd_memory_lock_to_pool
// itself, once per HIP device, and enters it in MemObjMap: a lock plus a known object. umem then
// never locks the range itself: two locks of one range would leave the kernel's registration to
// whichever came last (libhsakmt fmm.c: with the SVM API a registration sets or clears the range's
// COHERENT flag; without it a second one only counts), and hipHostUnregister would drop the other.
// It works with XNACK off and on (a lock needs no page faults), so this mapper serves both; the
// pages are pinned either way, so segments neither grow nor give back free pages
// (pageable() false; Note [Pinned memory does not grow] in gpu_visible_source.hpp).
// Before registering, hipPointerGetAttributes must find the range unknown: clr's ihipHostRegister
// does not refuse a base MemObjMap already holds (MemObjMap::AddMemObj keeps the first object and
// only logs), so a second registration would leak a pinned object; a segment HIP already knows is
// an error. After it, the device address must equal the host address (zero-copy), else the
// registration is undone and map() throws unsupported, as rocr_gpu_mapper does for its locks.
// unmap() is hipHostUnregister, before the source gives the pages back (gpu_visible_source
// unmaps, then deallocates); clr waits there for the registering device's streams
// (ihipHostUnregister: SyncAllStreams), as PyTorch's own empty_cache synchronizes.
// Coherence: HIP locks every registration to the system fine-grained pool (roc::Buffer::create
// picks dev().SystemSegment() for CL_MEM_SVM_ATOMICS, which ihipHostRegister always sets;
// hipExtHostRegisterCoarseGrained is accepted and has no effect there). On an MI300A that costs
// coarse segments nothing: for system memory on an APU the kernel picks the page's MTYPE from
// locality alone, the COHERENT flag never enters (drivers/gpu/drm/amd/amdgpu/gmc_v9_0.c
// gmc_v9_0_get_coherence_flags for IP 9.4.3: uncached, else ext_coherent, else
// `is_local ? mtype_local : MTYPE_NC`; kfd_svm.c svm_range_get_pte_flags alike). Only
// EXT_COHERENT changes it, and hipHostRegister cannot ask for it, so an extended_fine segment is
// refused (unsupported, naming the reason) rather than served silently weaker. A discrete GPU's
// own memory (MI300X) is ROCr pool memory, known to HIP through the arena (rocr_device_source.hpp).
// Capacity: a registration pins user pages (KFD userptr or SVM memory), which the kernel counts
// against its system-memory limit, not the TTM limit that caps hipMalloc on an MI300A at about
// 3/4 of the node (amdgpu_amdkfd_gpuvm.c amdgpu_amdkfd_reserve_mem_limit: a USERPTR allocation
// adds to system_mem_needed only, ttm_mem_needed stays 0), so umem's segments can use the APU's
// whole memory.
// Failures: hipErrorOutOfMemory is out_of_memory. hipErrorInvalidValue for a range umem has
// checked (its own fresh segment: non-null, non-empty, unknown to HIP, flags HIP accepts) can only
// mean that the lock failed (ihipHostRegister answers so when mem->create fails; ROCr's
// MemoryRegion::Lock fails when the kernel cannot pin the pages), so it is out_of_memory as well,
// which sends the allocator's reclaim ladder to give cached memory back and retry. Anything else
// is runtime_error naming the call, its status and the segment. The segment is then released by
// gpu_visible_source: never half registered.
//
// Memory umem did not allocate (register_foreign): a zero-copy alias of a tensor from another
// allocator (numpy, a memory-mapped file, the shared memory DataLoader workers return batches in)
// is registered the same way for the alias's life (Note [Foreign registrations] in
// foreign_registrations.hpp: page-rounded, counted, refused where known only in part). With XNACK
// on that makes the memory known to HIP; with XNACK off the lock is what lets the GPU reach it at
// all (pins_foreign()), as it does for umem's own segments. A range HIP already knows (PyTorch's
// pinned memory from hipHostMalloc) needs nothing.
// hipErrorInvalidValue there means the lock failed: KFD pins only writable pages of a range
// wholly mapped (read-only maps such as np.load(mmap_mode="r") fail on its userptr path,
// amdgpu_amdkfd_gpuvm.c init_user_pages), also refused (unsupported). What it costs: the lock
// pins the pages (the kernel's system-memory limit counts them), and releasing the last handle
// is hipHostUnregister, which waits for the registering device's streams (clr
// ihipHostUnregister: SyncAllStreams): the GPU cannot still be reading memory whose alias died,
// and the CPU stalls until the GPU caught up, once per registration.
//
// In a forked child (Note [Fork] in fork_safety.hpp) no HIP call is made: map() and unmap() do
// nothing (host memory only; HIP runs over ROCr, and KFD serves only its opener), and
// register_foreign is refused (foreign_registrations), so the caller copies.
//
// Thread safety: map() and unmap() keep no state; register_foreign is foreign_registrations'.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/gpu/foreign_registrations.hpp"
#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/hip_runtime/hip_runtime.hpp"

namespace umem::alloc {

class hip_gpu_mapper final : public gpu_mapper {
 public:
  // `why`: one clause saying why HIP decides here ("XNACK off; HIP <path> is loaded").
  hip_gpu_mapper(std::shared_ptr<const hip::hip_runtime> hip, std::string why);
  ~hip_gpu_mapper() override;

  // Throws umem::error: invalid_argument for an empty segment or an unknown coherence;
  // unsupported for extended_fine, or when HIP maps the range at another device address;
  // out_of_memory or runtime_error (Note [GPU visibility under HIP]).
  void map(const segment& s) override;
  // Failures are logged (errors), never thrown.
  void unmap(const segment& s) noexcept override;
  // False in a forked child (Note [Fork]).
  bool gpu_accessible() const override { return !creator_.is_other(); }
  bool pageable() const override { return false; }  // registered pages are pinned
  std::string describe() const override;
  std::shared_ptr<void> register_foreign(const void* p, std::size_t bytes) override;
  bool pins_foreign() const override { return !creator_.is_other(); }


 private:
  std::shared_ptr<const hip::hip_runtime> hip_;
  std::string why_;
  std::shared_ptr<foreign_registrations> foreign_;  // shared with its handles
  creating_process creator_;
};

}  // namespace umem::alloc
