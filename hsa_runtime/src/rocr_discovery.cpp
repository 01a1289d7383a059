#include "umem/hsa_runtime/rocr_discovery.hpp"

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_handles.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace umem::hsa {
namespace {

namespace rc = rocr_compat;

using umem::detail::hex;

// Queries through one loaded runtime. get_* throw for any failure; probe_* return nullopt when
// the runtime does not know the attribute (INVALID_ARGUMENT) and throw for other failures.
class prober {
 public:
  explicit prober(const rocr_library& lib) : lib_(lib), fn_(lib.fn()) {}

  template <class T>
  std::optional<T> probe_system(std::uint32_t attr) {
    T v{};
    return answer(fn_.hsa_system_get_info(attr, &v), v, "hsa_system_get_info", attr);
  }
  std::optional<bool> probe_system_bool(std::uint32_t attr) {
    auto v = probe_system<std::uint8_t>(attr);  // a C++ bool; read as a byte, never trap
    return v ? std::optional<bool>(*v != 0) : std::nullopt;
  }

  template <class T>
  std::optional<T> probe_agent(rocr_agent a, std::uint32_t attr) {
    T v{};
    return answer(fn_.hsa_agent_get_info(a, attr, &v), v, "hsa_agent_get_info", attr);
  }
  template <class T>
  T get_agent(rocr_agent a, std::uint32_t attr) {
    T v{};
    lib_.check(fn_.hsa_agent_get_info(a, attr, &v), symbol("hsa_agent_get_info", attr).c_str());
    return v;
  }
  std::optional<bool> probe_agent_bool(rocr_agent a, std::uint32_t attr) {
    auto v = probe_agent<std::uint8_t>(a, attr);
    return v ? std::optional<bool>(*v != 0) : std::nullopt;
  }
  template <std::size_t N>
  std::string get_agent_string(rocr_agent a, std::uint32_t attr) {
    char buf[N + 1] = {};  // one spare byte keeps the string terminated whatever the runtime wrote
    lib_.check(fn_.hsa_agent_get_info(a, attr, buf), symbol("hsa_agent_get_info", attr).c_str());
    return std::string(buf, strnlen(buf, N));
  }

  template <class T>
  std::optional<T> probe_pool(rocr_pool p, std::uint32_t attr) {
    T v{};
    return answer(fn_.hsa_amd_memory_pool_get_info(p, attr, &v), v, "hsa_amd_memory_pool_get_info",
                  attr);
  }
  template <class T>
  T get_pool(rocr_pool p, std::uint32_t attr) {
    T v{};
    lib_.check(fn_.hsa_amd_memory_pool_get_info(p, attr, &v),
               symbol("hsa_amd_memory_pool_get_info", attr).c_str());
    return v;
  }

  const rocr_library& lib() const { return lib_; }
  const rocr_functions& fn() const { return fn_; }

 private:
  static std::string symbol(const char* name, std::uint32_t attr) {
    return std::string(name) + "(" + hex(attr) + ")";
  }
  template <class T>
  std::optional<T> answer(rocr_status s, const T& v, const char* name, std::uint32_t attr) {
    if (s == rc::status::invalid_argument) return std::nullopt;
    lib_.check(s, symbol(name, attr).c_str());
    return v;
  }

  const rocr_library& lib_;
  const rocr_functions& fn_;
};

std::vector<rocr_agent> list_agents(const prober& p) { return agents_of(p.lib()); }

std::vector<std::string> read_isas(prober& p, rocr_agent a) {
  std::vector<rocr_isa> isas;
  p.lib().check(p.fn().hsa_agent_iterate_isas(a, &collect_handle<rocr_isa>, &isas),
                "hsa_agent_iterate_isas");
  std::vector<std::string> names;
  for (rocr_isa isa : isas) {
    std::uint32_t len = 0;
    p.lib().check(p.fn().hsa_isa_get_info_alt(isa, rc::isa_info::name_length, &len),
                  "hsa_isa_get_info_alt(NAME_LENGTH)");
    // NAME_LENGTH counts the terminator in ROCr; a spare byte covers runtimes that do not.
    std::vector<char> buf(std::size_t{len} + 1, '\0');
    p.lib().check(p.fn().hsa_isa_get_info_alt(isa, rc::isa_info::name, buf.data()),
                  "hsa_isa_get_info_alt(NAME)");
    names.emplace_back(buf.data(), strnlen(buf.data(), len));
  }
  return names;
}

memory_pool read_pool(prober& p, rocr_pool handle) {
  memory_pool pool;
  const auto segment = p.get_pool<std::uint32_t>(handle, rc::pool_info::segment);
  if (segment > static_cast<std::uint32_t>(pool_segment::group))
    throw_error(errc::runtime_error,
                "hsa_amd_memory_pool_get_info(SEGMENT) returned unknown "
                "segment " +
                    std::to_string(segment) + " (runtime " + p.lib().resolved_path() + ")");
  pool.segment = static_cast<pool_segment>(segment);
  if (pool.is_global())
    pool.global_flags = p.get_pool<std::uint32_t>(handle, rc::pool_info::global_flags);
  pool.size_bytes = p.get_pool<std::size_t>(handle, rc::pool_info::size);
  pool.alloc_allowed = p.get_pool<std::uint8_t>(handle, rc::pool_info::alloc_allowed) != 0;
  pool.alloc_granule = p.get_pool<std::size_t>(handle, rc::pool_info::alloc_granule);
  pool.alloc_alignment = p.get_pool<std::size_t>(handle, rc::pool_info::alloc_alignment);
  pool.accessible_by_all = p.get_pool<std::uint8_t>(handle, rc::pool_info::accessible_by_all) != 0;
  pool.alloc_max_size = p.probe_pool<std::size_t>(handle, rc::pool_info::alloc_max_size);
  pool.alloc_rec_granule = p.probe_pool<std::size_t>(handle, rc::pool_info::alloc_rec_granule);
  if (auto loc = p.probe_pool<std::uint32_t>(handle, rc::pool_info::location)) {
    if (*loc <= static_cast<std::uint32_t>(pool_location::gpu))
      pool.location = static_cast<pool_location>(*loc);
    else
      log().debug("pool LOCATION {} is not cpu/gpu; left unknown", *loc);
  }
  return pool;
}

agent read_agent(prober& p, rocr_agent handle) {
  namespace ai = rc::agent_info;
  agent a;
  switch (p.get_agent<std::uint32_t>(handle, ai::device)) {
    case rc::device_type::cpu: a.kind = agent_kind::cpu; break;
    case rc::device_type::gpu: a.kind = agent_kind::gpu; break;
    default: a.kind = agent_kind::other; break;
  }
  a.name = p.get_agent_string<rc::agent_name_size>(handle, ai::name);
  a.marketing_name = p.get_agent_string<rc::agent_name_size>(handle, ai::product_name);
  a.vendor_name = p.get_agent_string<rc::agent_name_size>(handle, ai::vendor_name);
  a.uuid = p.get_agent_string<rc::agent_uuid_size>(handle, ai::uuid);
  a.kfd_node = p.get_agent<std::uint32_t>(handle, ai::driver_node_id);
  a.isas = read_isas(p, handle);
  if (auto props = p.probe_agent<std::array<std::uint8_t, 8>>(handle, ai::memory_properties)) {
    std::uint8_t bytes[8];
    std::memcpy(bytes, props->data(), sizeof bytes);
    a.is_apu = rc::flag_isset64(bytes, rc::memory_property_is_apu_bit);
  }
  a.coherent_host_access = p.probe_agent_bool(handle, ai::svm_direct_host_access);
  a.compute_units = p.get_agent<std::uint32_t>(handle, ai::compute_unit_count);
  a.simds_per_cu = p.get_agent<std::uint32_t>(handle, ai::num_simds_per_cu);
  a.shader_engines = p.get_agent<std::uint32_t>(handle, ai::num_shader_engines);
  a.num_xcc = p.probe_agent<std::uint32_t>(handle, ai::num_xcc);
  a.chip_id = p.get_agent<std::uint32_t>(handle, ai::chip_id);
  a.bdfid = p.get_agent<std::uint32_t>(handle, ai::bdfid);
  a.pci_domain = p.probe_agent<std::uint32_t>(handle, ai::domain);

  for (rocr_pool pool : pools_of(p.lib(), handle)) a.pools.push_back(read_pool(p, pool));
  return a;
}

std::string no_driver_reason(const rocr_library& lib, rocr_status status) {
  const std::string returned = "hsa_init returned " + hex(status) + " " + lib.status_text(status);
  // ROCr maps every driver-open failure to OUT_OF_RESOURCES; /dev/kfd tells which one it was.
  if (!fs_root().exists("/dev/kfd"))
    return "no AMD GPU driver: /dev/kfd is absent (" + returned + ")";
  return "the AMD GPU driver is not usable by this process although /dev/kfd exists (" + returned +
         "); check the permissions of /dev/kfd and /dev/dri (video/render groups)";
}

void discover_system(prober& p, hsa_system_info& hsa) {
  namespace si = rc::system_info;
  hsa.version_major = p.probe_system<std::uint16_t>(si::version_major);
  hsa.version_minor = p.probe_system<std::uint16_t>(si::version_minor);
  hsa.ext_version_major = p.probe_system<std::uint16_t>(si::ext_version_major);
  hsa.ext_version_minor = p.probe_system<std::uint16_t>(si::ext_version_minor);
  hsa.xnack_enabled = p.probe_system_bool(si::xnack_enabled);
  hsa.svm_supported = p.probe_system_bool(si::svm_supported);
  hsa.svm_accessible_by_default = p.probe_system_bool(si::svm_accessible_by_default);
  hsa.virtual_mem_api_supported = p.probe_system_bool(si::virtual_mem_api_supported);
  hsa.dmabuf_supported = p.probe_system_bool(si::dmabuf_supported);
  hsa.mwaitx_enabled = p.probe_system_bool(si::mwaitx_enabled);
}

}  // namespace

void discover_rocr(topology& topo) {
  std::optional<rocr_library> lib;
  try {
    lib.emplace(rocr_library::load());
  } catch (const error& e) {
    if (e.code() != errc::runtime_unavailable && e.code() != errc::runtime_error) throw;
    topo.hsa = hsa_system_info{};
    topo.hsa.state = runtime_state::no_library;
    topo.hsa.state_reason = e.what();
    topo.agents.clear();
    topo.sources.emplace_back("rocr");
    log().info("ROCr discovery: {}", topo.hsa.state_reason);
    return;
  }
  discover_rocr(topo, *lib);
}

void discover_rocr(topology& topo, const rocr_library& lib) {
  topo.hsa = hsa_system_info{};
  topo.hsa.library_path = lib.resolved_path();
  topo.agents.clear();
  topo.sources.emplace_back("rocr");

  rocr_status init_status = rc::status::success;
  auto session = rocr_session::try_open(lib, init_status);
  if (!session) {
    if (init_status == rc::status::out_of_resources) {
      topo.hsa.state = runtime_state::no_driver;
      topo.hsa.state_reason = no_driver_reason(lib, init_status);
    } else {
      topo.hsa.state = runtime_state::init_failed;
      topo.hsa.state_reason =
          "hsa_init failed: " + hex(init_status) + " " + lib.status_text(init_status);
    }
    log().info("ROCr discovery ({}): {}", lib.resolved_path(), topo.hsa.state_reason);
    return;
  }

  prober p(lib);
  discover_system(p, topo.hsa);
  const char* build = nullptr;
  const bool has_build =
      lib.fn().hsa_system_get_info(rc::system_info::build_version, &build) == rc::status::success &&
      build != nullptr;
  topo.hsa.state = runtime_state::available;
  topo.hsa.state_reason =
      "hsa_init succeeded (ROCr " + std::string(has_build ? build : "build version unknown") + ")";

  const auto handles = list_agents(p);
  std::map<std::uint64_t, std::uint32_t> kfd_node_of_cpu;
  for (rocr_agent h : handles) {
    topo.agents.push_back(read_agent(p, h));
    if (topo.agents.back().kind == agent_kind::cpu)
      kfd_node_of_cpu[h.handle] = topo.agents.back().kfd_node;
  }
  // NEAREST_CPU names an agent handle; the model keeps that CPU's KFD node. CPU agents answer
  // handle 0.
  for (std::size_t i = 0; i < handles.size(); ++i) {
    auto nearest = p.probe_agent<rocr_agent>(handles[i], rc::agent_info::nearest_cpu);
    if (!nearest || nearest->handle == 0) continue;
    if (auto it = kfd_node_of_cpu.find(nearest->handle); it != kfd_node_of_cpu.end())
      topo.agents[i].nearest_cpu_kfd_node = it->second;
    else
      log().warn("agent {} (KFD node {}) names a nearest CPU that is not a CPU agent",
                 topo.agents[i].name, topo.agents[i].kfd_node);
  }

  // Before ROCr 6.0 there is no XNACK_ENABLED; SVM_ACCESSIBLE_BY_DEFAULT is the AND over GPU
  // agents of "ISA has xnack+", the same fact, but vacuously true without GPUs.
  if (!topo.hsa.xnack_enabled && !topo.gpus().empty())
    topo.hsa.xnack_enabled = topo.hsa.svm_accessible_by_default;

  log().info("ROCr discovery ({}): {} agents, {}", lib.resolved_path(), topo.agents.size(),
             topo.hsa.state_reason);
}

}  // namespace umem::hsa
