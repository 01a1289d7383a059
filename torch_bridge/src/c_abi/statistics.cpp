// libumem_torch's C ABI, umem_torch.h's section "Statistics, cache and capacity": what
// umem.torch's statistics functions and PyTorch's (through either mode) ask of the bridge.
#include <cstddef>
#include <nlohmann/json.hpp>

#include "bridge_instance.hpp"
#include "umem/umem_torch.h"

using umem::torch_bridge::bridge;
using umem::torch_bridge::c_abi::get_bridge;
using umem::torch_bridge::c_abi::last;

static_assert(UMEM_TORCH_ALL_DEVICES == umem::torch_bridge::bridge::all_devices &&
              UMEM_TORCH_HOST == umem::torch_bridge::bridge::host);

extern "C" {

umem_status umem_torch_empty_cache(int device_synchronized, size_t* released) {
  return guarded(last, [&] {
    const std::size_t n = get_bridge().empty_cache(device_synchronized != 0);
    if (released != nullptr) *released = n;
  });
}

umem_status umem_torch_set_memory_fraction(double fraction, int device) {
  return guarded(last, [&] { get_bridge().set_memory_fraction(fraction, device); });
}

umem_status umem_torch_get_memory_fraction(int device, double* fraction) {
  if (fraction == nullptr)
    return fail(last, UMEM_ERR_INVALID_ARGUMENT,
                "umem_torch_get_memory_fraction: fraction is NULL");
  return guarded(last, [&] { *fraction = get_bridge().memory_fraction(device); });
}

umem_status umem_torch_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes) {
  return guarded(last, [&] {
    const auto [f, t] = get_bridge().mem_get_info(device);
    if (free_bytes != nullptr) *free_bytes = f;
    if (total_bytes != nullptr) *total_bytes = t;
  });
}

char* umem_torch_memory_stats_json(int device) {
  return guarded_string(last, [&] {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : get_bridge().memory_stats(device)) j[k] = v;
    return j.dump();
  });
}

umem_status umem_torch_reset_peak_stats(int device) {
  return guarded(last, [&] { get_bridge().reset_peak_stats(device); });
}

}  // extern "C"
