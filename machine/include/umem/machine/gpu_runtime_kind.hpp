// Which GPU runtime a process uses: the one vocabulary for it above core (topology keeps the
// selection as text, topology::gpu_backend, because snapshots store it).
#pragma once

#include <optional>
#include <string_view>

#include "umem/core/topology.hpp"

namespace umem::machine {

enum class gpu_runtime_kind { rocr, cuda, none };

// "rocr", "cuda" or "none": the names UMEM_GPU_BACKEND takes and topology::gpu_backend records.
const char* to_string(gpu_runtime_kind k);

// The kind `name` names (to_string's inverse); nullopt for anything else.
std::optional<gpu_runtime_kind> gpu_runtime_kind_named(std::string_view name);

// The runtime `topo` records as selected (topo.gpu_backend.name); none when nothing was selected
// (a topology from captures) or the name is not a runtime's.
gpu_runtime_kind selected_gpu_runtime(const topology& topo);

}  // namespace umem::machine
