// Which memory a GPU works in, the one place umem decides it (Note [Device memory kinds]).
//
// Note [Device memory kinds]
// unified: the GPU works in host memory. An APU (MI300A: ROCr's APU memory-property flag; an
// NVIDIA GPU with INTEGRATED set) has no other memory, and a GPU with PAGEABLE_MEMORY_ACCESS
// (HMM, Grace Hopper's ATS) reaches host pages at full coherence, so `device:D` placements are
// host NUMA memory on the GPU's node, made GPU-visible (gpu_visible_source.hpp).
// discrete: the GPU has memory of its own behind a bus (H200, MI300X). Host memory made visible
// to it is read across PCIe by every kernel (docs/log/2026-12-05-comment-numbers.md: GPT-2 on
// an H200), so `device:D` placements come from the GPU's own memory instead, through the
// allocator's device memory source (allocator/gpu/gpu_visibility.hpp).
// An attribute discovery could not read counts as not set: a GPU is unified only when the driver
// says so. Both GPU runtimes follow this kind: the CUDA one through cuda_device_source.hpp, the
// ROCr one through the GPU's VRAM pool (rocr_device_source.hpp). ROCr older than 6.1 does not
// report is_apu, so there a discrete GPU counts as unified and keeps host memory.
#pragma once

#include "umem/core/topology.hpp"

namespace umem::machine {

enum class gpu_memory_kind { unified, discrete };

// "unified" or "discrete".
const char* to_string(gpu_memory_kind k);

// The kind of `gpu` (an agent of kind gpu): CUDA agents are unified when PAGEABLE_MEMORY_ACCESS
// or INTEGRATED is set; other (ROCr) agents when is_apu is set or unknown (ROCr < 6.1 does not
// report it, and every MI300A-class node umem targets is an APU).
gpu_memory_kind memory_kind_of(const agent& gpu);

}  // namespace umem::machine
