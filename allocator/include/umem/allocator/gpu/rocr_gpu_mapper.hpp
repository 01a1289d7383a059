// Making host NUMA memory usable by the socket's GPU agents through ROCr
// (docs/rocm-runtime.md §2.2, §3).
//
// Note [SVM mode and lock mode]
// XNACK on (topology::xnack_enabled() true): the GPU can retry faults, so plain mmap memory only
// needs to be mapped for it. map() calls hsa_amd_svm_attributes_set with GLOBAL_FLAG (fine or
// coarse) and AGENT_ACCESSIBLE_IN_PLACE for each GPU agent local to the segment's nodes; "in
// place" because on an APU the pages stay where mbind put them. KFD's SVM has no extended-scope
// model, so extended_fine segments get the FINE_GRAINED flag (the strongest there is). unmap()
// sets AGENT_NO_ACCESS for the same agents: KFD would drop the range at munmap anyway, but a
// source may keep the range mapped for reuse, and access must not outlive the segment.
// XNACK off (or unknown; locking is safe either way): a GPU touching memory it has no mapping for
// faults fatally, so map() pins the range with hsa_amd_memory_lock_to_pool to the CPU agent of
// the segment's (first) node, choosing that agent's GLOBAL pool of the requested coherence
// (fine: FINE_GRAINED without KERNARG; coarse: COARSE_GRAINED; extended_fine:
// EXTENDED_SCOPE_FINE_GRAINED, or FINE_GRAINED on runtimes without that pool, logged), and
// grants exactly the GPU agents local to the segment's nodes. Zero-copy needs the agent address
// to equal the host address; if ROCr answers another, the lock is undone and map() throws
// umem::error(unsupported). unmap() is hsa_amd_memory_unlock. Locking does not move pages: NUMA
// placement stays mbind's job, the pool only selects the coherence.
//
// Which GPUs are local: topology::gpu_numa (umem::numa::map_gpus_to_numa). Which CPU agent
// serves NUMA node N: KFD CPU node i is the i-th NUMA node with CPUs (docs/rocm-runtime.md §4).
// Interleaved (or multi-node) segments grant every GPU local to any of their nodes.
//
// In a forked child (Note [Fork] in fork_safety.hpp) map() and unmap() make no ROCr call: KFD
// serves only the process that opened it, so the child's segments are host memory only.
//
// Thread safety: everything is looked up once at construction; map() and unmap() only read it,
// and ROCr's calls are thread-safe, so both may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/fork_safety.hpp"
#include "umem/allocator/gpu/gpu_mapper.hpp"
#include "umem/core/topology.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::alloc {

enum class gpu_map_mode { svm, lock };

class rocr_gpu_mapper final : public gpu_mapper {
 public:
  // Opens a ROCr session on `lib` (hsa_init now, hsa_shut_down at destruction; `lib` must
  // outlive the mapper), enumerates its agents and the CPU agents' GLOBAL pools, and matches them
  // to `topo` by KFD node. `topo` is not kept. Throws umem::error: runtime_unavailable or
  // runtime_error when hsa_init or an enumeration call fails; invalid_argument when `topo` has GPU
  // agents but no GPU->NUMA bindings, or binds a GPU the runtime does not enumerate.
  rocr_gpu_mapper(const umem::topology& topo, const hsa::rocr_library& lib);
  // In a forked child the session is left open: hsa_shut_down would be a ROCr call there.
  ~rocr_gpu_mapper() override;

  // Throws umem::error: invalid_argument for an empty segment or a node not in the topology;
  // unsupported when no GPU agent is local to the segment's nodes, the node has no CPU agent or
  // no pool of the requested coherence, or ROCr would map the range at another address;
  // runtime_error naming the ROCr call and its status text when ROCr refuses.
  void map(const segment& s) override;
  // Failures are logged (errors), never thrown.
  void unmap(const segment& s) noexcept override;
  // False in a forked child (Note [Fork]).
  bool gpu_accessible() const override { return !creator_.is_other(); }
  // SVM ranges stay pageable (the GPU retries faults); locked ranges are pinned.
  bool pageable() const override { return mode_ == gpu_map_mode::svm; }
  std::string describe() const override;

  gpu_map_mode mode() const { return mode_; }

 private:
  struct cpu_agent_pools {
    std::uint32_t kfd_node = 0;
    hsa::rocr_agent agent;
    std::optional<hsa::rocr_pool> fine, coarse, extended_fine;
  };
  struct node_agents {
    std::optional<cpu_agent_pools> cpu;  // nullopt: a CPU-less node (or ROCr has no agent for it)
    std::vector<hsa::rocr_agent> gpus;   // GPU agents local to the node, in gpu_numa order
  };

  std::vector<hsa::rocr_agent> gpus_for(const segment& s) const;
  hsa::rocr_pool pool_for(const segment& s) const;
  void map_svm(const segment& s, const std::vector<hsa::rocr_agent>& gpus) const;
  void map_lock(const segment& s, const std::vector<hsa::rocr_agent>& gpus) const;
  // lib_.check with the segment and the purpose (making accessible or releasing) in the message.
  void check(hsa::rocr_status status, const char* call, const segment& s, bool releasing) const;

  const hsa::rocr_library& lib_;
  std::unique_ptr<hsa::rocr_session> session_;
  creating_process creator_;
  gpu_map_mode mode_;
  std::string mode_reason_;
  std::map<int, node_agents> nodes_;  // by OS NUMA node index
  bool extended_fine_fallback_ = false;
};

}  // namespace umem::alloc
