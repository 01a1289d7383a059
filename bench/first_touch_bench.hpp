// First touch of 1 GiB from umem's host_numa_source, with huge pages (MADV_HUGEPAGE) and without
// (MADV_NOHUGEPAGE), population "none": the segment is mapped and bound untimed, then every
// 4 KiB of it is written once, timed (wall and thread CPU time), counting the minor page faults
// (getrusage ru_minflt) and the huge-page-backed bytes that appeared (AnonHugePages of
// /proc/self/smaps_rollup), and the system-wide compaction stalls and huge-page fallbacks of
// /proc/vmstat during the touch (other processes may add to those).
// With THP "madvise" (this machine's setting) MADV_HUGEPAGE is what lets a 2 MiB fault replace
// 512 small ones; the THP "defrag" setting decides whether such a fault may compact memory to
// find a huge page (madvise: yes, synchronously) or falls back to small pages.
#pragma once

namespace umem::bench {

// Registers "first_touch/huge_pages:on" and ".../huge_pages:off" on NUMA node `node`, each run
// `iterations` times (every iteration maps, touches and unmaps a fresh 1 GiB segment).
void register_first_touch(int node, int iterations);

}  // namespace umem::bench
