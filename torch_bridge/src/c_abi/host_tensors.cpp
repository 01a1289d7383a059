// libumem_torch's C ABI, umem_torch.h's section "Host tensors and zero-copy aliases": what
// umem.torch's host tensors, gpu_access, residency and zero_copy ask of the bridge.
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "bridge_instance.hpp"
#include "umem/core/error.hpp"
#include "umem/umem_torch.h"

using umem::torch_bridge::bridge;
using umem::torch_bridge::c_abi::get_bridge;
using umem::torch_bridge::c_abi::last;

extern "C" {

umem_status umem_torch_host_malloc(size_t size, int node, void** out) {
  if (out == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT, "umem_torch_host_malloc: out is NULL");
  *out = nullptr;
  return guarded(last, [&] { *out = get_bridge().allocate_host(size, node); });
}

umem_status umem_torch_host_free(void* ptr) {
  if (ptr == nullptr) return UMEM_OK;
  return guarded(last, [&] { get_bridge().deallocate_host(ptr); });
}

umem_status umem_torch_host_record_use(void* ptr, void* stream, int device) {
  // Every non_blocking copy of any CPU tensor asks: memory that is not umem's is an answer, not a
  // failure worth an exception.
  bool recorded = false;
  const umem_status s =
      guarded(last, [&] { recorded = get_bridge().record_host_use(ptr, stream, device); });
  if (s != UMEM_OK || recorded) return s;
  return fail(last, UMEM_ERR_NOT_FOUND,
              "umem_torch_host_record_use: not a live block of umem_torch_host_malloc, or one that "
              "another GPU's streams use already");
}

char* umem_torch_gpu_access_json(const void* ptr, size_t size) {
  return guarded_string(last, [&] {
    const auto a = get_bridge().access(ptr, size);
    nlohmann::json j;
    j["accessible"] = a.accessible;
    j["umem"] = a.umem_memory;
    j["host_accessible"] = a.host_accessible;
    j["registrable"] = a.registrable;
    j["reason"] = a.reason;
    return j.dump();
  });
}

umem_status umem_torch_alias_register(const void* ptr, size_t size, void** handle) {
  return guarded(last, [&] {
    if (handle == nullptr)
      umem::throw_error(umem::errc::invalid_argument, "umem_torch_alias_register: handle is NULL");
    *handle = nullptr;
    if (auto h = get_bridge().register_alias(ptr, size))
      *handle = new std::shared_ptr<void>(std::move(h));
  });
}

umem_status umem_torch_alias_release(void* handle) {
  delete static_cast<std::shared_ptr<void>*>(handle);
  return UMEM_OK;
}

char* umem_torch_device_json(int device) {
  return guarded_string(last, [&] {
    const bridge& b = get_bridge();
    return nlohmann::json{{"device", device},
                          {"memory", b.device_memory_is_host(device) ? "host" : "device"},
                          {"numa_node", b.node_of_device(device)}}
        .dump();
  });
}

char* umem_torch_residency_json(const void* ptr, size_t size) {
  return guarded_string(last, [&] {
    return umem::alloc::to_json(get_bridge().allocator().residency(ptr, size), -1);
  });
}

}  // extern "C"
