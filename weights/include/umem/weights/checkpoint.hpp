// Which .safetensors files a checkpoint path names: a file, a sharded checkpoint's
// *.safetensors.index.json ({"weight_map": {tensor: file}}, files relative to the index), or a
// folder holding exactly one index or, without one, exactly one .safetensors file.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace umem::weights {

struct checkpoint {
  std::vector<std::string> files;                 // in the order of first appearance
  std::map<std::string, std::string> weight_map;  // tensor -> file, for an index; else empty
};

// Throws umem::error(invalid_argument) naming the path and what is wrong (no such file, a folder
// with none or several candidates, a malformed index, a shard that does not exist).
checkpoint resolve_checkpoint(const std::string& path);

// The index text `json` of the file `index_path` (shards are looked up beside it). Throws as
// resolve_checkpoint does.
checkpoint parse_checkpoint_index(std::string_view json, const std::string& index_path);

}  // namespace umem::weights
