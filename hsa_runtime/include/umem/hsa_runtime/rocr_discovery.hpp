// Live discovery through ROCr: fills topology::hsa and topology::agents from the runtime.
//
// Note [What discovery reports instead of failing]
// A node without ROCm or without an AMD GPU driver is an ordinary place for umem to run, so
// discover_rocr never throws for those: it records why in topo.hsa.state / state_reason
// (no_library with every path tried, no_driver when hsa_init says there is no /dev/kfd,
// init_failed with the runtime's status text). Attributes newer than the loaded runtime answer
// INVALID_ARGUMENT and stay std::nullopt. It throws umem::error(runtime_error) only when an
// initialised runtime fails a query every ROCr release answers.
#pragma once

#include "umem/core/topology.hpp"

namespace umem::hsa {

class rocr_library;

// Loads the runtime (rocr_library::load), then discovers through it. Replaces topo.hsa and
// topo.agents, and appends "rocr" to topo.sources in every case (the verdict in topo.hsa is
// this backend's finding even when no runtime could be loaded).
void discover_rocr(topology& topo);
// The same through an already loaded runtime; runs its own hsa_init/hsa_shut_down.
void discover_rocr(topology& topo, const rocr_library& lib);

}  // namespace umem::hsa
