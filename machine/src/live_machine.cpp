#include "umem/machine/live_machine.hpp"

#include <unistd.h>

#include <climits>

#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hsa_runtime/kernel_knobs.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/machine/gpu_runtime_selection.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::machine {
namespace {

std::string this_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

live_machine discover_live_machine() {
  live_machine m;
  topology& t = m.topo;
  const fs_root root("/");
  t.hostname = this_hostname();
  try {
    m.rocr = std::make_shared<const hsa::rocr_library>(hsa::rocr_library::load());
  } catch (const error& e) {
    log().debug("no ROCr library: {}", e.what());
  }
  // Without a library, discover_rocr records why (every path tried) in topo.hsa.
  if (m.rocr)
    hsa::discover_rocr(t, *m.rocr);
  else
    hsa::discover_rocr(t);
  // After ROCr's verdict, which decides it; a CUDA runtime adds its GPUs here.
  m.runtime = select_gpu_runtime(t, m.rocr);
  t.kfd_nodes = hsa::read_kfd_topology(root);
  if (!t.kfd_nodes.empty()) t.sources.push_back("kfd-sysfs:/");
  t.knobs = hsa::read_kernel_knobs(root);
  t.sources.push_back("knobs:/");
  t.numa = numa::load_hwloc_live();
  t.sources.push_back("hwloc:live");
  t.gpu_numa = numa::map_gpus_to_numa(t, &root);
  return m;
}

}  // namespace umem::machine
