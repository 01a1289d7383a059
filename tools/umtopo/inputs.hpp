// Where umtopo's topology comes from: the live machine, or any combination of captured inputs.
// Note [No mixing]: once a captured input is named, the live machine is not consulted at all, so
// a replayed MI300A is never silently mixed with this machine's NUMA nodes or knobs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "umem/core/topology.hpp"

namespace umem::umtopo {

struct inputs {
  std::optional<std::string> snapshot;        // --snapshot FILE (a umtopo --capture file)
  std::optional<std::string> rocminfo;        // --rocminfo FILE
  std::optional<std::string> numactl;         // --numactl FILE (numactl --hardware output)
  std::optional<std::string> hwloc_xml;       // --hwloc-xml FILE
  std::optional<std::string> sysfs_root;      // --sysfs-root DIR (KFD topology, knobs, PCI)
  std::optional<std::string> kfd_properties;  // --kfd-properties FILE (cat nodes/*/properties)
  std::optional<std::string> gather;          // --from-gather FILE (a umtopo --gather archive)

  bool any_capture() const;
};

// What an importer did not understand, for the user to see (file:line: text).
struct assembled {
  topology topo;
  std::vector<std::string> warnings;
};

// Builds the model. Throws umem::error for unreadable or malformed inputs.
assembled assemble(const inputs& in);

}  // namespace umem::umtopo
