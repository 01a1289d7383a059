#include "inputs.hpp"

#include "gather_replay.hpp"

#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/core/text_file.hpp"
#include "umem/hsa_runtime/kernel_knobs.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/machine/live_machine.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace umem::umtopo {
namespace {

template <typename Diagnostics>
void collect(const std::string& file, const Diagnostics& diags, std::vector<std::string>& out) {
  for (const auto& d : diags)
    out.push_back(file + ":" + std::to_string(d.line) + ": " + d.message + ": " + d.text);
}

}  // namespace

bool inputs::any_capture() const {
  return snapshot || rocminfo || numactl || hwloc_xml || sysfs_root || kfd_properties || gather;
}

assembled assemble(const inputs& in) {
  assembled out;
  topology& t = out.topo;
  if (!in.any_capture()) {
    t = machine::discover_live_machine().topo;
    return out;
  }
  if (in.numactl && in.hwloc_xml)
    throw_error(errc::invalid_argument,
                "--numactl and --hwloc-xml both describe the NUMA nodes; give one of them");

  if (in.snapshot && in.gather)
    throw_error(errc::invalid_argument, "--snapshot and --from-gather are both a whole node; give one of them");
  if (in.snapshot) t = load_snapshot(*in.snapshot);
  if (in.gather) t = replay_gather(*in.gather).topo;
  if (in.rocminfo) {
    auto imp = importers::import_rocminfo(read_text_file(*in.rocminfo, "rocminfo capture"),
                                          *in.rocminfo);
    collect(*in.rocminfo, imp.unrecognized, out.warnings);
    t.hsa = imp.topo.hsa;
    t.agents = std::move(imp.topo.agents);
    t.sources.insert(t.sources.end(), imp.topo.sources.begin(), imp.topo.sources.end());
  }
  if (in.numactl) {
    auto imp = importers::import_numactl(read_text_file(*in.numactl, "numactl capture"),
                                         *in.numactl);
    collect(*in.numactl, imp.unrecognized, out.warnings);
    t.numa = std::move(imp.numa);
    t.sources.push_back("numactl:" + *in.numactl);
  }
  if (in.hwloc_xml) {
    t.numa = numa::load_hwloc_xml(*in.hwloc_xml);
    t.sources.push_back("hwloc-xml:" + *in.hwloc_xml);
  }
  std::optional<fs_root> sysfs;
  if (in.sysfs_root) {
    sysfs.emplace(*in.sysfs_root);
    t.kfd_nodes = hsa::read_kfd_topology(*sysfs);
    t.knobs = hsa::read_kernel_knobs(*sysfs);
    t.sources.push_back("sysfs:" + *in.sysfs_root);
  }
  if (in.kfd_properties) {
    t.kfd_nodes = hsa::import_kfd_properties_dump(
        read_text_file(*in.kfd_properties, "KFD properties capture"), *in.kfd_properties);
    t.sources.push_back("kfd-properties:" + *in.kfd_properties);
  }
  // A snapshot or gather carries its own bindings; anything layered on top may change them.
  if ((!in.snapshot && !in.gather) || in.rocminfo || in.numactl || in.hwloc_xml || in.sysfs_root ||
      in.kfd_properties)
    t.gpu_numa = numa::map_gpus_to_numa(t, sysfs ? &*sysfs : nullptr);
  return out;
}

}  // namespace umem::umtopo
