#include "umem/weights/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "umem/core/error.hpp"

namespace umem::weights {
namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw_error(errc::invalid_argument, "checkpoint " + path + ": " + what);
}

checkpoint from_index(const fs::path& index) {
  std::ifstream in(index);
  if (!in) bad(index.string(), "cannot read the index");
  std::stringstream text;
  text << in.rdbuf();
  return parse_checkpoint_index(text.str(), index.string());
}

}  // namespace

checkpoint resolve_checkpoint(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) bad(path, "no such file or folder");
  if (fs::is_directory(st)) {
    std::vector<fs::path> indexes, files;
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file()) continue;
      if (ends_with(name, ".safetensors.index.json")) indexes.push_back(e.path());
      if (ends_with(name, ".safetensors")) files.push_back(e.path());
    }
    std::sort(indexes.begin(), indexes.end());
    std::sort(files.begin(), files.end());
    if (indexes.size() == 1) return from_index(indexes[0]);
    if (indexes.size() > 1)
      bad(path, "the folder holds " + std::to_string(indexes.size()) +
                    " *.safetensors.index.json files; name the one to load");
    if (files.size() == 1) return checkpoint{{files[0].string()}, {}};
    bad(path, files.empty() ? "the folder holds no .safetensors file and no index"
                            : "the folder holds " + std::to_string(files.size()) +
                                  " .safetensors files and no *.safetensors.index.json; name "
                                  "the file or the index to load");
  }
  if (ends_with(path, ".index.json")) return from_index(path);
  return checkpoint{{path}, {}};
}

checkpoint parse_checkpoint_index(std::string_view json, const std::string& index_path) {
  const fs::path index(index_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    bad(index.string(), std::string("the index is not valid JSON: ") + e.what());
  }
  const auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || map == j.end() || !map->is_object())
    bad(index.string(), "the index has no \"weight_map\" object (tensor name -> shard file)");
  checkpoint c;
  std::set<std::string> seen;
  for (const auto& [tensor, file] : map->items()) {
    if (!file.is_string())
      bad(index.string(), "\"weight_map\" entry '" + tensor + "' is not a file name");
    const std::string name = file.get<std::string>();
    if (name.empty() || fs::path(name).is_absolute() || name.find("..") != std::string::npos)
      bad(index.string(), "shard '" + name + "' of tensor '" + tensor +
                              "' must be a file name beside the index");
    const std::string shard = (index.parent_path() / name).string();
    c.weight_map.emplace(tensor, shard);
    if (seen.insert(shard).second) {
      if (!fs::is_regular_file(shard))
        bad(index.string(), "shard " + shard + " (of tensor '" + tensor + "') does not exist");
      c.files.push_back(shard);
    }
  }
  if (c.files.empty()) bad(index.string(), "the index names no tensor");
  return c;
}

}  // namespace umem::weights
