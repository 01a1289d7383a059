// The H200 the CUDA double serves in the tests and in bench/torch_bridge: the lent GPU machine as
// its driver answered (data/h200_probe_attributes.txt). Topology types only, so a benchmark
// builds it without the test harness.
#pragma once

#include "umem/core/topology.hpp"

namespace umem::test {

// The GPU as the lent H200 machine's driver answered it, read from the raw capture
// data/h200_probe_attributes.txt (tests/gpu_cuda/probe_attributes.cpp through cuda.h, not umem;
// run on 2026-11-30, driver 580.159.04). "P:n" is the line of that file.
inline umem::agent h200_agent() {
  umem::agent a;
  a.kind = umem::agent_kind::gpu;
  a.name = "sm_90";                  // P:11-12 COMPUTE_CAPABILITY 9.0
  a.marketing_name = "NVIDIA H200";  // P:3
  a.vendor_name = "NVIDIA";
  a.uuid = "GPU-56812e38-c4d4-0a77-7723-c74e0f7ea913";  // P:6, in nvidia-smi's form
  a.kfd_node = 0;
  a.compute_units = 132;           // P:7 MULTIPROCESSOR_COUNT
  a.bdfid = 0x06 << 3;             // P:4 0000:00:06.0
  a.pci_domain = 0;
  a.is_apu = false;                // P:8 INTEGRATED 0
  a.coherent_host_access = false;  // P:15 PAGEABLE_MEMORY_ACCESS 0
  umem::cuda_device_info c;
  c.ordinal = 0;
  c.cc_major = 9;
  c.cc_minor = 0;
  c.total_memory_bytes = 150109880320ull;                  // P:5
  c.integrated = false;                                    // P:8
  c.can_map_host_memory = true;                            // P:9
  c.unified_addressing = true;                             // P:10
  c.managed_memory = true;                                 // P:13
  c.pageable_memory_access = false;                        // P:15
  c.concurrent_managed_access = true;                      // P:16
  c.can_use_host_pointer_for_registered_mem = true;        // P:17
  c.host_register_supported = true;                        // P:18
  c.pageable_memory_access_uses_host_page_tables = false;  // P:19
  c.direct_managed_mem_access_from_host = false;           // P:20
  c.host_numa_id = 0;                                      // P:21
  a.cuda = c;
  return a;
}

// That machine's driver: CUDA 13.0 (P:1), serving the one H200.
inline umem::topology h200_machine() {
  umem::topology t;
  t.agents.push_back(h200_agent());
  t.cuda.driver_version = 13000;  // P:1
  return t;
}

}  // namespace umem::test
