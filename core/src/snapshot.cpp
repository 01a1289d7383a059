#include "umem/core/snapshot.hpp"

#include <fstream>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "umem/core/error.hpp"
#include "umem/core/text_file.hpp"

using nlohmann::json;

// Note [Snapshot format]
// One JSON object {"format": "umem-topology", "schema_version": N, ...model...}. Every optional
// model field is written as null when unknown, so a reader can tell "not known" from "false/0".
// Enums are written as their to_string names, so a human can read and edit a snapshot.
// Unknown keys are ignored (forward compatibility within one schema version); missing or
// mistyped keys are errors naming the JSON path. Exception: the keys added for the CUDA backend
// (agents[].cuda, cuda, gpu_backend) may be absent, so snapshots written before them still load
// (absent reads as "not probed"); when present they are as strict as the rest.

namespace umem {

namespace {

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

constexpr const char* kFormat = "umem-topology";

template <typename E, std::size_t N>
E enum_from(const json& j, const E (&values)[N]) {
  const auto& s = j.get_ref<const std::string&>();
  for (E v : values)
    if (s == to_string(v)) return v;
  throw std::invalid_argument("unknown value '" + s + "'");
}

constexpr agent_kind kAgentKinds[] = {agent_kind::cpu, agent_kind::gpu, agent_kind::other};
constexpr pool_segment kSegments[] = {pool_segment::global, pool_segment::readonly,
                                      pool_segment::private_, pool_segment::group};
constexpr runtime_state kStates[] = {runtime_state::not_probed, runtime_state::available,
                                     runtime_state::no_library, runtime_state::no_driver,
                                     runtime_state::init_failed, runtime_state::imported};
constexpr iommu_mode kIommu[] = {iommu_mode::unknown, iommu_mode::off, iommu_mode::passthrough,
                                 iommu_mode::translated};

constexpr pool_location kLocations[] = {pool_location::cpu, pool_location::gpu};

// Reading side: a cursor that remembers its JSON path for error messages.
class reader {
 public:
  reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  reader at(const std::string& key) const {
    if (!j_.is_object()) fail("expected an object");
    auto it = j_.find(key);
    if (it == j_.end()) throw std::invalid_argument(path_ + "." + key + ": missing");
    return reader(*it, path_ + "." + key);
  }
  // The member, or nullopt when the key is absent (for keys added after a snapshot format).
  std::optional<reader> find(const std::string& key) const {
    if (!j_.is_object()) fail("expected an object");
    auto it = j_.find(key);
    if (it == j_.end()) return std::nullopt;
    return reader(*it, path_ + "." + key);
  }
  reader at(std::size_t i) const { return reader(j_.at(i), path_ + "[" + std::to_string(i) + "]"); }

  // Containers are read element by element, so every number in them gets the checks below
  // (nlohmann would convert 1.8e93 to an unsigned int: undefined behaviour, found by fuzzing).
  std::size_t size() const {
    if (!j_.is_array()) fail(std::string("wrong type (") + j_.type_name() + "), expected an array");
    return j_.size();
  }
  template <typename T>
  std::vector<T> list() const {
    size();  // an array, or a clear error
    std::vector<T> out;
    out.reserve(j_.size());
    for (std::size_t i = 0; i < j_.size(); ++i) out.push_back(at(i).template get<T>());
    return out;
  }
  template <typename T>
  std::map<std::string, T> map_of() const {
    if (!j_.is_object()) fail(std::string("wrong type (") + j_.type_name() + "), expected an object");
    std::map<std::string, T> out;
    for (const auto& [key, value] : j_.items()) out.emplace(key, at(key).template get<T>());
    return out;
  }

  template <typename T>
  T get() const {
    // nlohmann converts -1 to 4294967295 and 2^40 to a truncated uint32; a snapshot edited by
    // hand must not turn into a silently different machine.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!j_.is_number_integer()) fail(std::string("wrong type (") + j_.type_name() + ")");
      const bool fits = j_.is_number_unsigned()
                            ? std::in_range<T>(j_.template get<std::uint64_t>())
                            : std::in_range<T>(j_.template get<std::int64_t>());
      if (!fits) fail("integer " + j_.dump() + " out of range");
    }
    try {
      return j_.get<T>();
    } catch (const json::exception& e) {
      fail(std::string("wrong type (") + j_.type_name() + ")");
    }
  }
  template <typename T>
  std::optional<T> opt() const {
    if (j_.is_null()) return std::nullopt;
    return get<T>();
  }
  template <typename E, std::size_t N>
  E enumeration(const E (&values)[N]) const {
    if (!j_.is_string()) fail("expected a string");
    try {
      return enum_from(j_, values);
    } catch (const std::invalid_argument& e) {
      fail(e.what());
    }
  }
  template <typename F>
  void each(F&& f) const {
    if (!j_.is_array()) fail("expected an array");
    for (std::size_t i = 0; i < j_.size(); ++i) f(at(i));
  }
  const json& raw() const { return j_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(path_ + ": " + what);
  }

 private:
  const json& j_;
  std::string path_;
};

json write_pool(const memory_pool& p) {
  return json{{"segment", to_string(p.segment)},
              {"global_flags", p.global_flags},
              {"size_bytes", p.size_bytes},
              {"alloc_allowed", p.alloc_allowed},
              {"alloc_granule", p.alloc_granule},
              {"alloc_rec_granule", opt(p.alloc_rec_granule)},
              {"alloc_alignment", p.alloc_alignment},
              {"accessible_by_all", p.accessible_by_all},
              {"alloc_max_size", opt(p.alloc_max_size)},
              {"location", p.location ? json(to_string(*p.location)) : json(nullptr)}};
}

memory_pool read_pool(const reader& r) {
  memory_pool p;
  p.segment = r.at("segment").enumeration(kSegments);
  p.global_flags = r.at("global_flags").get<std::uint32_t>();
  p.size_bytes = r.at("size_bytes").get<std::uint64_t>();
  p.alloc_allowed = r.at("alloc_allowed").get<bool>();
  p.alloc_granule = r.at("alloc_granule").get<std::uint64_t>();
  p.alloc_rec_granule = r.at("alloc_rec_granule").opt<std::uint64_t>();
  p.alloc_alignment = r.at("alloc_alignment").get<std::uint64_t>();
  p.accessible_by_all = r.at("accessible_by_all").get<bool>();
  p.alloc_max_size = r.at("alloc_max_size").opt<std::uint64_t>();
  if (auto loc = r.at("location"); !loc.raw().is_null()) p.location = loc.enumeration(kLocations);
  return p;
}

json write_cuda_device(const cuda_device_info& c) {
  return json{{"ordinal", c.ordinal},
              {"cc_major", c.cc_major},
              {"cc_minor", c.cc_minor},
              {"total_memory_bytes", c.total_memory_bytes},
              {"integrated", opt(c.integrated)},
              {"can_map_host_memory", opt(c.can_map_host_memory)},
              {"unified_addressing", opt(c.unified_addressing)},
              {"managed_memory", opt(c.managed_memory)},
              {"pageable_memory_access", opt(c.pageable_memory_access)},
              {"concurrent_managed_access", opt(c.concurrent_managed_access)},
              {"can_use_host_pointer_for_registered_mem",
               opt(c.can_use_host_pointer_for_registered_mem)},
              {"host_register_supported", opt(c.host_register_supported)},
              {"pageable_memory_access_uses_host_page_tables",
               opt(c.pageable_memory_access_uses_host_page_tables)},
              {"direct_managed_mem_access_from_host", opt(c.direct_managed_mem_access_from_host)},
              {"host_numa_id", opt(c.host_numa_id)}};
}

cuda_device_info read_cuda_device(const reader& r) {
  cuda_device_info c;
  c.ordinal = r.at("ordinal").get<std::uint32_t>();
  c.cc_major = r.at("cc_major").get<std::uint32_t>();
  c.cc_minor = r.at("cc_minor").get<std::uint32_t>();
  c.total_memory_bytes = r.at("total_memory_bytes").get<std::uint64_t>();
  c.integrated = r.at("integrated").opt<bool>();
  c.can_map_host_memory = r.at("can_map_host_memory").opt<bool>();
  c.unified_addressing = r.at("unified_addressing").opt<bool>();
  c.managed_memory = r.at("managed_memory").opt<bool>();
  c.pageable_memory_access = r.at("pageable_memory_access").opt<bool>();
  c.concurrent_managed_access = r.at("concurrent_managed_access").opt<bool>();
  c.can_use_host_pointer_for_registered_mem =
      r.at("can_use_host_pointer_for_registered_mem").opt<bool>();
  c.host_register_supported = r.at("host_register_supported").opt<bool>();
  c.pageable_memory_access_uses_host_page_tables =
      r.at("pageable_memory_access_uses_host_page_tables").opt<bool>();
  c.direct_managed_mem_access_from_host = r.at("direct_managed_mem_access_from_host").opt<bool>();
  c.host_numa_id = r.at("host_numa_id").opt<int>();
  return c;
}

json write_agent(const agent& a) {
  json pools = json::array();
  for (const auto& p : a.pools) pools.push_back(write_pool(p));
  return json{{"kind", to_string(a.kind)},
              {"name", a.name},
              {"marketing_name", a.marketing_name},
              {"vendor_name", a.vendor_name},
              {"uuid", a.uuid},
              {"kfd_node", a.kfd_node},
              {"isas", a.isas},
              {"is_apu", opt(a.is_apu)},
              {"coherent_host_access", opt(a.coherent_host_access)},
              {"compute_units", a.compute_units},
              {"simds_per_cu", a.simds_per_cu},
              {"shader_engines", a.shader_engines},
              {"num_xcc", opt(a.num_xcc)},
              {"chip_id", a.chip_id},
              {"bdfid", a.bdfid},
              {"pci_domain", opt(a.pci_domain)},
              {"nearest_cpu_kfd_node", opt(a.nearest_cpu_kfd_node)},
              {"pools", pools},
              {"cuda", a.cuda ? write_cuda_device(*a.cuda) : json(nullptr)}};
}

agent read_agent(const reader& r) {
  agent a;
  a.kind = r.at("kind").enumeration(kAgentKinds);
  a.name = r.at("name").get<std::string>();
  a.marketing_name = r.at("marketing_name").get<std::string>();
  a.vendor_name = r.at("vendor_name").get<std::string>();
  a.uuid = r.at("uuid").get<std::string>();
  a.kfd_node = r.at("kfd_node").get<std::uint32_t>();
  a.isas = r.at("isas").list<std::string>();
  a.is_apu = r.at("is_apu").opt<bool>();
  a.coherent_host_access = r.at("coherent_host_access").opt<bool>();
  a.compute_units = r.at("compute_units").get<std::uint32_t>();
  a.simds_per_cu = r.at("simds_per_cu").get<std::uint32_t>();
  a.shader_engines = r.at("shader_engines").get<std::uint32_t>();
  a.num_xcc = r.at("num_xcc").opt<std::uint32_t>();
  a.chip_id = r.at("chip_id").get<std::uint32_t>();
  a.bdfid = r.at("bdfid").get<std::uint32_t>();
  a.pci_domain = r.at("pci_domain").opt<std::uint32_t>();
  a.nearest_cpu_kfd_node = r.at("nearest_cpu_kfd_node").opt<std::uint32_t>();
  r.at("pools").each([&](const reader& p) { a.pools.push_back(read_pool(p)); });
  if (auto c = r.find("cuda"); c && !c->raw().is_null()) a.cuda = read_cuda_device(*c);
  return a;
}

json write_hsa(const hsa_system_info& h) {
  return json{{"state", to_string(h.state)},
              {"state_reason", h.state_reason},
              {"library_path", h.library_path},
              {"version_major", opt(h.version_major)},
              {"version_minor", opt(h.version_minor)},
              {"ext_version_major", opt(h.ext_version_major)},
              {"ext_version_minor", opt(h.ext_version_minor)},
              {"xnack_enabled", opt(h.xnack_enabled)},
              {"svm_supported", opt(h.svm_supported)},
              {"svm_accessible_by_default", opt(h.svm_accessible_by_default)},
              {"virtual_mem_api_supported", opt(h.virtual_mem_api_supported)},
              {"dmabuf_supported", opt(h.dmabuf_supported)},
              {"mwaitx_enabled", opt(h.mwaitx_enabled)}};
}

hsa_system_info read_hsa(const reader& r) {
  hsa_system_info h;
  h.state = r.at("state").enumeration(kStates);
  h.state_reason = r.at("state_reason").get<std::string>();
  h.library_path = r.at("library_path").get<std::string>();
  h.version_major = r.at("version_major").opt<std::uint16_t>();
  h.version_minor = r.at("version_minor").opt<std::uint16_t>();
  h.ext_version_major = r.at("ext_version_major").opt<std::uint16_t>();
  h.ext_version_minor = r.at("ext_version_minor").opt<std::uint16_t>();
  h.xnack_enabled = r.at("xnack_enabled").opt<bool>();
  h.svm_supported = r.at("svm_supported").opt<bool>();
  h.svm_accessible_by_default = r.at("svm_accessible_by_default").opt<bool>();
  h.virtual_mem_api_supported = r.at("virtual_mem_api_supported").opt<bool>();
  h.dmabuf_supported = r.at("dmabuf_supported").opt<bool>();
  h.mwaitx_enabled = r.at("mwaitx_enabled").opt<bool>();
  return h;
}

json write_cuda(const cuda_system_info& c) {
  return json{{"state", to_string(c.state)},
              {"state_reason", c.state_reason},
              {"library_path", c.library_path},
              {"driver_version", opt(c.driver_version)}};
}

cuda_system_info read_cuda(const reader& r) {
  cuda_system_info c;
  c.state = r.at("state").enumeration(kStates);
  c.state_reason = r.at("state_reason").get<std::string>();
  c.library_path = r.at("library_path").get<std::string>();
  c.driver_version = r.at("driver_version").opt<int>();
  return c;
}

json write_numa(const numa_topology& n) {
  json nodes = json::array();
  for (const auto& node : n.nodes)
    nodes.push_back(json{{"os_index", node.os_index},
                         {"cpus", node.cpus},
                         {"memory_total_bytes", node.memory_total_bytes},
                         {"memory_free_bytes", opt(node.memory_free_bytes)},
                         {"package", opt(node.package)}});
  return json{{"nodes", nodes}, {"distances", n.distances}};
}

numa_topology read_numa(const reader& r) {
  numa_topology n;
  r.at("nodes").each([&](const reader& e) {
    numa_node node;
    node.os_index = e.at("os_index").get<int>();
    node.cpus = e.at("cpus").list<unsigned>();
    node.memory_total_bytes = e.at("memory_total_bytes").get<std::uint64_t>();
    node.memory_free_bytes = e.at("memory_free_bytes").opt<std::uint64_t>();
    node.package = e.at("package").opt<int>();
    n.nodes.push_back(std::move(node));
  });
  const reader rows = r.at("distances");
  n.distances.clear();
  for (std::size_t i = 0; i < rows.size(); ++i)
    n.distances.push_back(rows.at(i).list<std::uint32_t>());
  return n;
}

json write_kfd(const kfd_node& k) {
  json banks = json::array(), links = json::array();
  for (const auto& b : k.mem_banks)
    banks.push_back(json{{"heap_type", b.heap_type},
                         {"size_bytes", b.size_bytes},
                         {"flags", b.flags},
                         {"width", b.width},
                         {"mem_clk_max", b.mem_clk_max}});
  for (const auto& l : k.io_links)
    links.push_back(json{{"type", l.type},
                         {"node_from", l.node_from},
                         {"node_to", l.node_to},
                         {"weight", l.weight},
                         {"min_bandwidth", l.min_bandwidth},
                         {"max_bandwidth", l.max_bandwidth},
                         {"flags", l.flags}});
  return json{{"id", k.id},       {"name", k.name},       {"gpu_id", k.gpu_id},
              {"properties", k.properties}, {"mem_banks", banks}, {"io_links", links}};
}

kfd_node read_kfd(const reader& r) {
  kfd_node k;
  k.id = r.at("id").get<std::uint32_t>();
  k.name = r.at("name").get<std::string>();
  k.gpu_id = r.at("gpu_id").get<std::uint64_t>();
  k.properties = r.at("properties").map_of<std::uint64_t>();
  r.at("mem_banks").each([&](const reader& b) {
    kfd_mem_bank bank;
    bank.heap_type = b.at("heap_type").get<std::uint32_t>();
    bank.size_bytes = b.at("size_bytes").get<std::uint64_t>();
    bank.flags = b.at("flags").get<std::uint32_t>();
    bank.width = b.at("width").get<std::uint32_t>();
    bank.mem_clk_max = b.at("mem_clk_max").get<std::uint32_t>();
    k.mem_banks.push_back(bank);
  });
  r.at("io_links").each([&](const reader& l) {
    kfd_io_link link;
    link.type = l.at("type").get<std::uint32_t>();
    link.node_from = l.at("node_from").get<std::uint32_t>();
    link.node_to = l.at("node_to").get<std::uint32_t>();
    link.weight = l.at("weight").get<std::uint32_t>();
    link.min_bandwidth = l.at("min_bandwidth").get<std::uint32_t>();
    link.max_bandwidth = l.at("max_bandwidth").get<std::uint32_t>();
    link.flags = l.at("flags").get<std::uint32_t>();
    k.io_links.push_back(link);
  });
  return k;
}

json write_knobs(const kernel_knobs& k) {
  return json{{"amdgpu_noretry", opt(k.amdgpu_noretry)},
              {"ttm_module", k.ttm_module},
              {"ttm_pages_limit", opt(k.ttm_pages_limit)},
              {"ttm_page_pool_size", opt(k.ttm_page_pool_size)},
              {"thp_enabled", opt(k.thp_enabled)},
              {"thp_defrag", opt(k.thp_defrag)},
              {"numa_balancing", opt(k.numa_balancing)},
              {"compaction_proactiveness", opt(k.compaction_proactiveness)},
              {"compact_unevictable_allowed", opt(k.compact_unevictable_allowed)},
              {"iommu", to_string(k.iommu)},
              {"iommu_evidence", k.iommu_evidence},
              {"mem_total_bytes", opt(k.mem_total_bytes)}};
}

kernel_knobs read_knobs(const reader& r) {
  kernel_knobs k;
  k.amdgpu_noretry = r.at("amdgpu_noretry").opt<int>();
  k.ttm_module = r.at("ttm_module").get<std::string>();
  k.ttm_pages_limit = r.at("ttm_pages_limit").opt<std::uint64_t>();
  k.ttm_page_pool_size = r.at("ttm_page_pool_size").opt<std::uint64_t>();
  k.thp_enabled = r.at("thp_enabled").opt<std::string>();
  k.thp_defrag = r.at("thp_defrag").opt<std::string>();
  k.numa_balancing = r.at("numa_balancing").opt<int>();
  k.compaction_proactiveness = r.at("compaction_proactiveness").opt<int>();
  k.compact_unevictable_allowed = r.at("compact_unevictable_allowed").opt<int>();
  k.iommu = r.at("iommu").enumeration(kIommu);
  k.iommu_evidence = r.at("iommu_evidence").get<std::string>();
  k.mem_total_bytes = r.at("mem_total_bytes").opt<std::uint64_t>();
  return k;
}

}  // namespace

std::string snapshot_to_json(const topology& t) {
  json agents = json::array(), kfd = json::array(), bindings = json::array();
  for (const auto& a : t.agents) agents.push_back(write_agent(a));
  for (const auto& k : t.kfd_nodes) kfd.push_back(write_kfd(k));
  for (const auto& b : t.gpu_numa)
    bindings.push_back(json{{"gpu_kfd_node", b.gpu_kfd_node},
                            {"numa_node", opt(b.numa_node)},
                            {"method", b.method},
                            {"evidence", b.evidence}});
  json j{{"format", kFormat},       {"schema_version", t.schema_version},
         {"sources", t.sources},    {"hostname", t.hostname},
         {"hsa", write_hsa(t.hsa)}, {"agents", agents},
         {"numa", write_numa(t.numa)}, {"kfd_nodes", kfd},
         {"knobs", write_knobs(t.knobs)}, {"gpu_numa", bindings},
         {"cuda", write_cuda(t.cuda)},
         {"gpu_backend", json{{"name", t.gpu_backend.name}, {"reason", t.gpu_backend.reason}}}};
  // Names read from a live runtime or sysfs are not guaranteed UTF-8; replace bad bytes (U+FFFD)
  // rather than failing to write a bug report.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

topology snapshot_from_json(std::string_view text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw_error(errc::parse_error, origin + ": not valid JSON; a snapshot is written by "
                                            "`umtopo --capture FILE`");
  try {
    reader r(j, "$");
    if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
      r.fail(std::string("not a umem topology snapshot (expected \"format\": \"") + kFormat +
             "\")");
    topology t;
    t.schema_version = r.at("schema_version").get<int>();
    if (t.schema_version != topology_schema_version)
      r.fail("schema_version " + std::to_string(t.schema_version) + " is not supported (this umem " +
             "reads version " + std::to_string(topology_schema_version) + ")");
    t.sources = r.at("sources").list<std::string>();
    t.hostname = r.at("hostname").get<std::string>();
    t.hsa = read_hsa(r.at("hsa"));
    r.at("agents").each([&](const reader& a) { t.agents.push_back(read_agent(a)); });
    t.numa = read_numa(r.at("numa"));
    r.at("kfd_nodes").each([&](const reader& k) { t.kfd_nodes.push_back(read_kfd(k)); });
    t.knobs = read_knobs(r.at("knobs"));
    r.at("gpu_numa").each([&](const reader& b) {
      gpu_numa_binding g;
      g.gpu_kfd_node = b.at("gpu_kfd_node").get<std::uint32_t>();
      g.numa_node = b.at("numa_node").opt<int>();
      g.method = b.at("method").get<std::string>();
      g.evidence = b.at("evidence").get<std::string>();
      t.gpu_numa.push_back(std::move(g));
    });
    if (auto c = r.find("cuda")) t.cuda = read_cuda(*c);
    if (auto b = r.find("gpu_backend")) {
      t.gpu_backend.name = b->at("name").get<std::string>();
      t.gpu_backend.reason = b->at("reason").get<std::string>();
    }
    return t;
  } catch (const std::invalid_argument& e) {
    throw_error(errc::parse_error, origin + ": " + e.what());
  } catch (const json::exception& e) {
    throw_error(errc::parse_error, origin + ": " + e.what());
  }
}

void save_snapshot(const topology& topo, const std::filesystem::path& file) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw_errno(errc::io_error, "cannot write snapshot " + file.string(), errno);
  out << snapshot_to_json(topo);
  out.flush();
  if (!out) throw_errno(errc::io_error, "cannot write snapshot " + file.string(), errno);
}

topology load_snapshot(const std::filesystem::path& file) {
  return snapshot_from_json(read_text_file(file, "snapshot"), file.string());
}

}  // namespace umem
