// Live discovery through the CUDA driver: fills topology::cuda and appends one GPU agent per
// CUDA device.
//
// Note [What CUDA discovery reports instead of failing]
// Like discover_rocr: a node without libcuda or without an NVIDIA GPU is ordinary, so nothing
// throws for those; topo.cuda.state says why (no_library with every path tried, no_driver when
// cuInit answers CUDA_ERROR_NO_DEVICE, init_failed with the driver's text otherwise). An
// attribute the driver does not know stays nullopt. It throws umem::error(runtime_error) only
// when an initialised driver fails a query every driver answers (count, name, memory, PCI id,
// compute capability).
//
// Each agent: kind gpu, name "sm_<major><minor>", marketing_name the device name, vendor
// "NVIDIA", uuid "GPU-..." as nvidia-smi prints it (when the driver has cuDeviceGetUuid_v2),
// compute_units the multiprocessor count, PCI domain and bdfid from cuDeviceGetPCIBusId,
// is_apu = INTEGRATED, coherent_host_access = PAGEABLE_MEMORY_ACCESS, and the attributes that
// matter for unified memory in agent::cuda. kfd_node is a model key only: CUDA agents are numbered
// after the agents already in the model, so GPU->NUMA bindings (keyed by it) stay unambiguous.
#pragma once

#include "umem/core/topology.hpp"

namespace umem::cuda {

class cuda_driver;

// Loads the driver (cuda_driver::load), then discovers through it. Replaces topo.cuda, appends
// the CUDA agents and "cuda" to topo.sources in every case.
void discover_cuda(topology& topo);
// The same through an already loaded driver (cuInit is called; it is idempotent).
void discover_cuda(topology& topo, const cuda_driver& drv);

}  // namespace umem::cuda
