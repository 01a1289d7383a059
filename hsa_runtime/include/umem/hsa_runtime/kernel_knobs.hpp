// The driver and kernel settings that decide what memory a GPU of an APU node may use, read
// through umem::fs_root so a captured tree can stand in for the live machine.
//
// Files read (all optional; a missing one leaves its field nullopt):
//   /sys/module/amdgpu/parameters/noretry
//   /sys/module/amdttm/parameters/{pages_limit,page_pool_size}   AMD's DKMS driver, preferred
//   /sys/module/ttm/parameters/{pages_limit,page_pool_size}      upstream driver, else
//   /sys/kernel/mm/transparent_hugepage/{enabled,defrag}          the [bracketed] choice
//   /proc/sys/kernel/numa_balancing
//   /proc/sys/vm/{compaction_proactiveness,compact_unevictable_allowed}
//   /sys/class/iommu/*, /sys/kernel/iommu_groups/*/type, /proc/cmdline   IOMMU mode
//   /proc/meminfo                                                 MemTotal
#pragma once

#include "umem/core/fs_root.hpp"
#include "umem/core/topology.hpp"

namespace umem::hsa {

// Note [IOMMU mode]
// With IOMMU units registered (/sys/class/iommu non-empty): the default domain type of the
// IOMMU groups decides when present ("identity" = passthrough, "DMA"/"DMA-FQ" = translated);
// otherwise iommu=pt or iommu.passthrough=1 on the command line means passthrough, and anything
// else translated. Without units: iommu=off, amd_iommu=off or intel_iommu=off, or an existing
// but empty /sys/class/iommu, mean off; iommu=pt alone means passthrough (requested, nothing
// contradicts it); no evidence at all leaves iommu_mode::unknown. iommu_evidence always says why.
//
// Throws umem::error(parse_error) naming the file for a present file whose content is not what
// the kernel writes there; never for a missing file.
umem::kernel_knobs read_kernel_knobs(const umem::fs_root& root);

}  // namespace umem::hsa
