// `umtopo --from-gather FILE`: the model of a gathered node (gather.hpp), built by the same
// readers that read the live node (KFD topology, kernel knobs, NUMA, GPU-to-NUMA) pointed at the
// gathered tree, with the runtime's recorded answers in place of a runtime. Nothing of this
// machine is read. The tree lives in a temporary directory only while the model is built.
#pragma once

#include <filesystem>

#include "gather_manifest.hpp"
#include "umem/core/topology.hpp"

namespace umem::umtopo {

struct replayed_gather {
  topology topo;
  gather_manifest manifest;
};

// Throws umem::error(parse_error) naming the file for a corrupt archive, a missing manifest or
// runtime record, or a gather version this umtopo does not read.
replayed_gather replay_gather(const std::filesystem::path& file);

}  // namespace umem::umtopo
