#include "umem/cuda_runtime/cuda_discovery.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"

namespace umem::cuda {
namespace {

namespace cc = cuda_compat;

// An attribute, or nullopt when this driver does not know it (CUDA_ERROR_INVALID_VALUE).
std::optional<int> attribute(const cuda_driver& drv, cu_device dev, int attr) {
  int v = 0;
  const cu_result r = drv.fn().cuDeviceGetAttribute(&v, attr, dev);
  if (r == cc::result::invalid_value) return std::nullopt;
  drv.check(r, ("cuDeviceGetAttribute(" + std::to_string(attr) + ")").c_str());
  return v;
}

std::optional<bool> flag(const cuda_driver& drv, cu_device dev, int attr) {
  const auto v = attribute(drv, dev, attr);
  if (!v) return std::nullopt;
  return *v != 0;
}

int required_attribute(const cuda_driver& drv, cu_device dev, int attr, const char* what) {
  const auto v = attribute(drv, dev, attr);
  if (!v)
    throw_error(errc::runtime_error, std::string("the CUDA driver ") + drv.resolved_path() +
                                         " does not report the " + what + " of device " +
                                         std::to_string(dev) + ", which every driver answers");
  return *v;
}

std::string uuid_text(const cu_uuid& u) {
  // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
  std::string out = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(u.bytes[i]));
    out += hex;
  }
  return out;
}

void set_pci(agent& a, const std::string& bus_id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  char tail = 0;
  if (std::sscanf(bus_id.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &device, &function, &tail) != 4 ||
      bus > 0xff || device > 0x1f || function > 7)
    throw_error(errc::runtime_error, "cuDeviceGetPCIBusId answered '" + bus_id +
                                         "', not a PCI address of the form 0000:01:00.0");
  a.pci_domain = domain;
  a.bdfid = bus << 8 | device << 3 | function;
}

agent discover_device(const cuda_driver& drv, int ordinal, std::uint32_t key) {
  cu_device dev = 0;
  drv.check(drv.fn().cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  agent a;
  a.kind = agent_kind::gpu;
  a.kfd_node = key;
  a.vendor_name = "NVIDIA";
  char name[cc::device_name_size] = {};
  drv.check(drv.fn().cuDeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName");
  a.marketing_name = name;
  if (drv.fn().cuDeviceGetUuid_v2 != nullptr) {
    cu_uuid u{};
    if (drv.fn().cuDeviceGetUuid_v2(&u, dev) == cc::result::success) a.uuid = uuid_text(u);
  }
  char bus_id[cc::pci_bus_id_size] = {};
  drv.check(drv.fn().cuDeviceGetPCIBusId(bus_id, sizeof bus_id - 1, dev), "cuDeviceGetPCIBusId");
  set_pci(a, bus_id);

  cuda_device_info c;
  c.ordinal = static_cast<std::uint32_t>(ordinal);
  c.cc_major = static_cast<std::uint32_t>(
      required_attribute(drv, dev, cc::attribute::compute_capability_major, "compute capability"));
  c.cc_minor = static_cast<std::uint32_t>(
      required_attribute(drv, dev, cc::attribute::compute_capability_minor, "compute capability"));
  std::size_t total = 0;
  drv.check(drv.fn().cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem");
  c.total_memory_bytes = total;
  c.integrated = flag(drv, dev, cc::attribute::integrated);
  c.can_map_host_memory = flag(drv, dev, cc::attribute::can_map_host_memory);
  c.unified_addressing = flag(drv, dev, cc::attribute::unified_addressing);
  c.managed_memory = flag(drv, dev, cc::attribute::managed_memory);
  c.pageable_memory_access = flag(drv, dev, cc::attribute::pageable_memory_access);
  c.concurrent_managed_access = flag(drv, dev, cc::attribute::concurrent_managed_access);
  c.can_use_host_pointer_for_registered_mem =
      flag(drv, dev, cc::attribute::can_use_host_pointer_for_registered_mem);
  c.host_register_supported = flag(drv, dev, cc::attribute::host_register_supported);
  c.pageable_memory_access_uses_host_page_tables =
      flag(drv, dev, cc::attribute::pageable_memory_access_uses_host_page_tables);
  c.direct_managed_mem_access_from_host =
      flag(drv, dev, cc::attribute::direct_managed_mem_access_from_host);
  if (const auto numa = attribute(drv, dev, cc::attribute::host_numa_id); numa && *numa >= 0)
    c.host_numa_id = *numa;

  a.name = "sm_" + std::to_string(c.cc_major) + std::to_string(c.cc_minor);
  a.compute_units = static_cast<std::uint32_t>(
      required_attribute(drv, dev, cc::attribute::multiprocessor_count, "multiprocessor count"));
  a.is_apu = c.integrated;
  a.coherent_host_access = c.pageable_memory_access;
  a.cuda = c;
  return a;
}

}  // namespace

void discover_cuda(topology& topo) {
  try {
    const cuda_driver drv = cuda_driver::load();
    discover_cuda(topo, drv);
  } catch (const error& e) {
    if (e.code() != errc::runtime_unavailable) throw;
    topo.cuda = {};
    topo.cuda.state = runtime_state::no_library;
    topo.cuda.state_reason = e.what();
    topo.sources.emplace_back("cuda");
  }
}

void discover_cuda(topology& topo, const cuda_driver& drv) {
  topo.sources.emplace_back("cuda");
  topo.cuda = {};
  topo.cuda.library_path = drv.resolved_path();
  int version = 0;
  if (drv.fn().cuDriverGetVersion(&version) == cc::result::success)
    topo.cuda.driver_version = version;
  const cu_result init = drv.fn().cuInit(0);
  if (init != cc::result::success) {
    topo.cuda.state =
        init == cc::result::no_device ? runtime_state::no_driver : runtime_state::init_failed;
    topo.cuda.state_reason = "cuInit: " + drv.result_text(init);
    log().debug("CUDA driver {}: {}", drv.resolved_path(), topo.cuda.state_reason);
    return;
  }
  int count = 0;
  drv.check(drv.fn().cuDeviceGetCount(&count), "cuDeviceGetCount");
  topo.cuda.state = runtime_state::available;
  topo.cuda.state_reason = "cuInit succeeded; " + std::to_string(count) + " CUDA device" +
                           (count == 1 ? "" : "s");
  std::uint32_t first_key = 0;
  for (const auto& a : topo.agents) first_key = std::max(first_key, a.kfd_node + 1);
  for (int i = 0; i < count; ++i)
    topo.agents.push_back(discover_device(drv, i, first_key + static_cast<std::uint32_t>(i)));
}

}  // namespace umem::cuda
