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
// mistyped keys are errors naming the JSON path.
//
// Note [Snapshot schema]
// Each struct's fields are listed once, in its fields() below; the writer and the reader walk
// the same list, so a field cannot be written and forgotten by the reader or the other way round.
// A field added to the schema gets the version that introduced it (the `since` argument) and
// topology_schema_version moves to that version: a snapshot of an older version may lack the
// field (it reads as the model's default), one of the version that has it must carry it.
// Versions: 1, the first; 2 added agents[].cuda, cuda and gpu_backend (the CUDA backend). Every
// version up to topology_schema_version loads; the model read is always of the current version.

namespace umem {

namespace {

constexpr const char* kFormat = "umem-topology";
constexpr int kFirstVersion = 1;

// The values of each enum written by name (to_string), for reading them back.
template <typename E>
struct enum_values;
template <>
struct enum_values<agent_kind> {
  static constexpr agent_kind all[] = {agent_kind::cpu, agent_kind::gpu, agent_kind::other};
};
template <>
struct enum_values<pool_segment> {
  static constexpr pool_segment all[] = {pool_segment::global, pool_segment::readonly,
                                         pool_segment::private_, pool_segment::group};
};
template <>
struct enum_values<runtime_state> {
  static constexpr runtime_state all[] = {runtime_state::not_probed, runtime_state::available,
                                          runtime_state::no_library, runtime_state::no_driver,
                                          runtime_state::init_failed, runtime_state::imported};
};
template <>
struct enum_values<iommu_mode> {
  static constexpr iommu_mode all[] = {iommu_mode::unknown, iommu_mode::off,
                                       iommu_mode::passthrough, iommu_mode::translated};
};
template <>
struct enum_values<pool_location> {
  static constexpr pool_location all[] = {pool_location::cpu, pool_location::gpu};
};

template <typename T>
struct is_optional : std::false_type {};
template <typename T>
struct is_optional<std::optional<T>> : std::true_type {};
template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
template <typename T>
struct is_string_map : std::false_type {};
template <typename T>
struct is_string_map<std::map<std::string, T>> : std::true_type {};

// ---- the schema: every serialized field of every struct, once ----------------------------------
// f(key, member) or f(key, member, since): `since` is the schema version that added the key.

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, memory_pool>
void fields(S& p, F&& f) {
  f("segment", p.segment);
  f("global_flags", p.global_flags);
  f("size_bytes", p.size_bytes);
  f("alloc_allowed", p.alloc_allowed);
  f("alloc_granule", p.alloc_granule);
  f("alloc_rec_granule", p.alloc_rec_granule);
  f("alloc_alignment", p.alloc_alignment);
  f("accessible_by_all", p.accessible_by_all);
  f("alloc_max_size", p.alloc_max_size);
  f("location", p.location);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, cuda_device_info>
void fields(S& c, F&& f) {
  f("ordinal", c.ordinal);
  f("cc_major", c.cc_major);
  f("cc_minor", c.cc_minor);
  f("total_memory_bytes", c.total_memory_bytes);
  f("integrated", c.integrated);
  f("can_map_host_memory", c.can_map_host_memory);
  f("unified_addressing", c.unified_addressing);
  f("managed_memory", c.managed_memory);
  f("pageable_memory_access", c.pageable_memory_access);
  f("concurrent_managed_access", c.concurrent_managed_access);
  f("can_use_host_pointer_for_registered_mem", c.can_use_host_pointer_for_registered_mem);
  f("host_register_supported", c.host_register_supported);
  f("pageable_memory_access_uses_host_page_tables",
    c.pageable_memory_access_uses_host_page_tables);
  f("direct_managed_mem_access_from_host", c.direct_managed_mem_access_from_host);
  f("host_numa_id", c.host_numa_id);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, agent>
void fields(S& a, F&& f) {
  f("kind", a.kind);
  f("name", a.name);
  f("marketing_name", a.marketing_name);
  f("vendor_name", a.vendor_name);
  f("uuid", a.uuid);
  f("kfd_node", a.kfd_node);
  f("isas", a.isas);
  f("is_apu", a.is_apu);
  f("coherent_host_access", a.coherent_host_access);
  f("compute_units", a.compute_units);
  f("simds_per_cu", a.simds_per_cu);
  f("shader_engines", a.shader_engines);
  f("num_xcc", a.num_xcc);
  f("chip_id", a.chip_id);
  f("bdfid", a.bdfid);
  f("pci_domain", a.pci_domain);
  f("nearest_cpu_kfd_node", a.nearest_cpu_kfd_node);
  f("pools", a.pools);
  f("cuda", a.cuda, 2);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, hsa_system_info>
void fields(S& h, F&& f) {
  f("state", h.state);
  f("state_reason", h.state_reason);
  f("library_path", h.library_path);
  f("version_major", h.version_major);
  f("version_minor", h.version_minor);
  f("ext_version_major", h.ext_version_major);
  f("ext_version_minor", h.ext_version_minor);
  f("xnack_enabled", h.xnack_enabled);
  f("svm_supported", h.svm_supported);
  f("svm_accessible_by_default", h.svm_accessible_by_default);
  f("virtual_mem_api_supported", h.virtual_mem_api_supported);
  f("dmabuf_supported", h.dmabuf_supported);
  f("mwaitx_enabled", h.mwaitx_enabled);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, cuda_system_info>
void fields(S& c, F&& f) {
  f("state", c.state);
  f("state_reason", c.state_reason);
  f("library_path", c.library_path);
  f("driver_version", c.driver_version);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, gpu_backend_info>
void fields(S& b, F&& f) {
  f("name", b.name);
  f("reason", b.reason);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, numa_node>
void fields(S& n, F&& f) {
  f("os_index", n.os_index);
  f("cpus", n.cpus);
  f("memory_total_bytes", n.memory_total_bytes);
  f("memory_free_bytes", n.memory_free_bytes);
  f("package", n.package);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, numa_topology>
void fields(S& n, F&& f) {
  f("nodes", n.nodes);
  f("distances", n.distances);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, kfd_mem_bank>
void fields(S& b, F&& f) {
  f("heap_type", b.heap_type);
  f("size_bytes", b.size_bytes);
  f("flags", b.flags);
  f("width", b.width);
  f("mem_clk_max", b.mem_clk_max);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, kfd_io_link>
void fields(S& l, F&& f) {
  f("type", l.type);
  f("node_from", l.node_from);
  f("node_to", l.node_to);
  f("weight", l.weight);
  f("min_bandwidth", l.min_bandwidth);
  f("max_bandwidth", l.max_bandwidth);
  f("flags", l.flags);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, kfd_node>
void fields(S& k, F&& f) {
  f("id", k.id);
  f("name", k.name);
  f("gpu_id", k.gpu_id);
  f("properties", k.properties);
  f("mem_banks", k.mem_banks);
  f("io_links", k.io_links);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, kernel_knobs>
void fields(S& k, F&& f) {
  f("amdgpu_noretry", k.amdgpu_noretry);
  f("ttm_module", k.ttm_module);
  f("ttm_pages_limit", k.ttm_pages_limit);
  f("ttm_page_pool_size", k.ttm_page_pool_size);
  f("thp_enabled", k.thp_enabled);
  f("thp_defrag", k.thp_defrag);
  f("numa_balancing", k.numa_balancing);
  f("compaction_proactiveness", k.compaction_proactiveness);
  f("compact_unevictable_allowed", k.compact_unevictable_allowed);
  f("iommu", k.iommu);
  f("iommu_evidence", k.iommu_evidence);
  f("mem_total_bytes", k.mem_total_bytes);
}

template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, gpu_numa_binding>
void fields(S& g, F&& f) {
  f("gpu_kfd_node", g.gpu_kfd_node);
  f("numa_node", g.numa_node);
  f("method", g.method);
  f("evidence", g.evidence);
}

// The model itself; "format" and "schema_version" are the envelope (snapshot_to/from_json).
template <typename S, typename F>
  requires std::is_same_v<std::remove_const_t<S>, topology>
void fields(S& t, F&& f) {
  f("sources", t.sources);
  f("hostname", t.hostname);
  f("hsa", t.hsa);
  f("agents", t.agents);
  f("numa", t.numa);
  f("kfd_nodes", t.kfd_nodes);
  f("knobs", t.knobs);
  f("gpu_numa", t.gpu_numa);
  f("cuda", t.cuda, 2);
  f("gpu_backend", t.gpu_backend, 2);
}

template <typename T>
concept has_fields = requires(T& v) { fields(v, [](const char*, auto&, int = 0) {}); };

// ---- writing -----------------------------------------------------------------------------------

template <typename T>
json to_json(const T& v) {
  if constexpr (is_optional<T>::value) {
    return v ? to_json(*v) : json(nullptr);
  } else if constexpr (std::is_enum_v<T>) {
    return json(to_string(v));
  } else if constexpr (is_vector<T>::value) {
    json out = json::array();
    for (const auto& e : v) out.push_back(to_json(e));
    return out;
  } else if constexpr (is_string_map<T>::value) {
    json out = json::object();
    for (const auto& [key, e] : v) out[key] = to_json(e);
    return out;
  } else if constexpr (has_fields<T>) {
    json out = json::object();
    fields(v, [&](const char* key, const auto& member, int = kFirstVersion) {
      out[key] = to_json(member);
    });
    return out;
  } else {
    return json(v);
  }
}

// ---- reading -----------------------------------------------------------------------------------

// A cursor that remembers its JSON path for error messages.
class reader {
 public:
  reader(const json& j, std::string path, int version)
      : j_(j), path_(std::move(path)), version_(version) {}

  // The member `key`, or nullopt when it is absent from a snapshot older than `since`.
  std::optional<reader> member(const std::string& key, int since) const {
    if (!j_.is_object()) fail(std::string("wrong type (") + j_.type_name() + "), expected an object");
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (version_ < since) return std::nullopt;
      throw std::invalid_argument(path_ + "." + key + ": missing");
    }
    return reader(*it, path_ + "." + key, version_);
  }
  reader at(const std::string& key) const { return *member(key, kFirstVersion); }

  template <typename T>
  void read(T& out) const {
    if constexpr (is_optional<T>::value) {
      if (j_.is_null()) {
        out.reset();
      } else {
        typename T::value_type v{};
        read(v);
        out = std::move(v);
      }
    } else if constexpr (std::is_enum_v<T>) {
      out = enumeration<T>();
    } else if constexpr (is_vector<T>::value) {
      // Element by element, so every number gets the checks of scalar() (nlohmann would convert
      // 1.8e93 to an unsigned int: undefined behaviour, found by fuzzing).
      if (!j_.is_array()) fail(std::string("wrong type (") + j_.type_name() + "), expected an array");
      out.clear();
      out.reserve(j_.size());
      for (std::size_t i = 0; i < j_.size(); ++i) {
        typename T::value_type v{};
        element(i).read(v);
        out.push_back(std::move(v));
      }
    } else if constexpr (is_string_map<T>::value) {
      if (!j_.is_object()) fail(std::string("wrong type (") + j_.type_name() + "), expected an object");
      out.clear();
      for (const auto& [key, value] : j_.items()) {
        typename T::mapped_type v{};
        at(key).read(v);
        out.emplace(key, std::move(v));
      }
    } else if constexpr (has_fields<T>) {
      fields(out, [&](const char* key, auto& m, int since = kFirstVersion) {
        if (auto r = member(key, since)) r->read(m);
      });
    } else {
      out = scalar<T>();
    }
  }

  const json& raw() const { return j_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument(path_ + ": " + what);
  }

 private:
  reader element(std::size_t i) const {
    return reader(j_.at(i), path_ + "[" + std::to_string(i) + "]", version_);
  }

  template <typename T>
  T scalar() const {
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

  template <typename E>
  E enumeration() const {
    if (!j_.is_string()) fail("expected a string");
    const auto& s = j_.get_ref<const std::string&>();
    for (E v : enum_values<E>::all)
      if (s == to_string(v)) return v;
    fail("unknown value '" + s + "'");
  }

  const json& j_;
  std::string path_;
  int version_;
};

}  // namespace

std::string snapshot_to_json(const topology& t) {
  json j = to_json(t);
  j["format"] = kFormat;
  j["schema_version"] = topology_schema_version;
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
    const reader envelope(j, "$", topology_schema_version);
    if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
      envelope.fail(std::string("not a umem topology snapshot (expected \"format\": \"") +
                    kFormat + "\")");
    int version = 0;
    envelope.at("schema_version").read(version);
    if (version < kFirstVersion || version > topology_schema_version)
      envelope.fail("schema_version " + std::to_string(version) + " is not supported (this umem " +
                    "reads versions " + std::to_string(kFirstVersion) + " to " +
                    std::to_string(topology_schema_version) + ")");
    topology t;
    reader(j, "$", version).read(t);
    t.schema_version = topology_schema_version;  // Note [Snapshot schema]: read as current
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
