// libumem_torch's C ABI, umem_torch.h's section "Model weights": checkpoints and .safetensors files
// read into umem host memory for umem.torch's weights functions.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "bridge_instance.hpp"
#include "umem/core/error.hpp"
#include "umem/umem_torch.h"
#include "umem/weights/checkpoint.hpp"
#include "umem/weights/safetensors_file.hpp"

using umem::torch_bridge::bridge;
using umem::torch_bridge::c_abi::get_bridge;
using umem::torch_bridge::c_abi::last;

namespace {

// Readers of weights for NUMA node `node` (-1: no binding) run on its CPUs (Note [Reading
// weights]).
umem::weights::read_options reader_options(const bridge& b, int node, unsigned threads,
                                           int direct_io) {
  umem::weights::read_options o{threads, direct_io != 0, {}};
  if (node >= 0) {
    const umem::numa_node* n = b.allocator().topo().find_numa_node(node);
    if (n == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "weights: NUMA node " + std::to_string(node) +
                            " is not a node of this machine");
    o.cpus = n->cpus;
  }
  return o;
}

// A file's tensors as load_safetensors reads them (umem_torch.h).
nlohmann::json layout_json(const umem::weights::safetensors_header& h, std::uint64_t data_bytes) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const umem::weights::tensor_entry& t : h.tensors)
    tensors.push_back({{"name", t.name},
                       {"dtype", std::string(umem::weights::dtype_name(t.dtype))},
                       {"shape", t.shape},
                       {"begin", t.begin},
                       {"end", t.end}});
  return {{"data_bytes", data_bytes}, {"metadata", h.metadata}, {"tensors", std::move(tensors)}};
}

}  // namespace

extern "C" {

char* umem_torch_checkpoint_json(const char* path) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_checkpoint_json: path is NULL");
    const umem::weights::checkpoint c = umem::weights::resolve_checkpoint(path);
    return nlohmann::json{{"files", c.files}, {"weight_map", c.weight_map}}.dump();
  });
}

char* umem_torch_load_safetensors_json(const char* path, int node, unsigned threads,
                                       int direct_io) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_load_safetensors_json: path is NULL");
    bridge& b = get_bridge();
    const umem::weights::loaded_safetensors f = umem::weights::read_safetensors(
        path, [&](std::size_t bytes) { return b.allocate_host(bytes, node); },
        [&](void* p) { b.deallocate_host(p); }, reader_options(b, node, threads, direct_io));
    nlohmann::json j = layout_json(f.header, f.data_bytes);
    j["block"] = reinterpret_cast<std::uintptr_t>(f.block);
    j["data"] = reinterpret_cast<std::uintptr_t>(f.data);
    return j.dump();
  });
}

char* umem_torch_safetensors_layout_json(const char* path) {
  return guarded_string(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument,
                        "umem_torch_safetensors_layout_json: path is NULL");
    const umem::weights::safetensors_layout l = umem::weights::read_safetensors_header(path);
    nlohmann::json j = layout_json(l.header, l.data_bytes);
    j["data_offset"] = l.data_offset;
    return j.dump();
  });
}

umem_status umem_torch_read_file(const char* path, uint64_t offset, uint64_t bytes, void* to,
                                 int node, unsigned threads, int direct_io) {
  return guarded(last, [&] {
    if (path == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_read_file: path is NULL");
    umem::weights::read_file_range(path, offset, bytes, to,
                                   reader_options(get_bridge(), node, threads, direct_io));
  });
}

}  // extern "C"
