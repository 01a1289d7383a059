#include "umem/numa/hwloc_source.hpp"

#include <hwloc.h>
#include <numa.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

namespace fs = std::filesystem;

namespace umem::numa {
namespace {

struct topology_deleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using topology_ptr = std::unique_ptr<hwloc_topology, topology_deleter>;

[[noreturn]] void throw_hwloc(const std::string& what, int err) {
  throw_errno(errc::runtime_error, "hwloc: " + what + " failed", err);
}

// Initialised, flags set, not loaded yet. Disallowed CPUs and nodes are kept: the model
// describes the machine, not what this process's cgroup may use.
topology_ptr make_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw_hwloc("hwloc_topology_init", errno);
  topology_ptr t(raw);
  if (hwloc_topology_set_flags(t.get(), HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0)
    throw_hwloc("hwloc_topology_set_flags(INCLUDE_DISALLOWED)", errno);
  return t;
}

std::vector<unsigned> to_list(hwloc_const_bitmap_t set) {
  std::vector<unsigned> out;
  for (int i = hwloc_bitmap_next(set, -1); i >= 0; i = hwloc_bitmap_next(set, i))
    out.push_back(static_cast<unsigned>(i));
  return out;
}

// Note [Which CPUs a NUMA node owns] in the header.
std::vector<std::vector<unsigned>> owned_cpus(const std::vector<hwloc_obj_t>& nodes) {
  std::vector<std::vector<unsigned>> owned(nodes.size());
  std::vector<int> weight(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) weight[i] = hwloc_bitmap_weight(nodes[i]->cpuset);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (unsigned cpu : to_list(nodes[i]->cpuset)) {
      bool owner = true;
      for (std::size_t j = 0; j < nodes.size() && owner; ++j) {
        if (j == i || !hwloc_bitmap_isset(nodes[j]->cpuset, cpu)) continue;
        // nodes are in ascending os_index, so j < i is the lower index on a tie.
        owner = weight[j] > weight[i] || (weight[j] == weight[i] && j > i);
      }
      if (owner) owned[i].push_back(cpu);
    }
  }
  return owned;
}

const char* kind_name(unsigned long kind) {
  if (kind & HWLOC_DISTANCES_KIND_FROM_OS) return "OS-provided";
  if (kind & HWLOC_DISTANCES_KIND_FROM_USER) return "user-provided";
  return "unattributed";
}

// The OS (ACPI SLIT) latency matrix among `nodes`, else any other latency matrix; bandwidth
// matrices are not in SLIT units and are never used.
std::vector<std::vector<std::uint32_t>> numa_distances(hwloc_topology_t t,
                                                       const std::vector<hwloc_obj_t>& nodes,
                                                       const std::string& where) {
  unsigned nr = 0;
  if (hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, nullptr,
                                  HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0)
    throw_hwloc("hwloc_distances_get_by_type(NUMANODE) for " + where, errno);
  std::vector<hwloc_distances_s*> all(nr, nullptr);
  if (nr > 0 && hwloc_distances_get_by_type(t, HWLOC_OBJ_NUMANODE, &nr, all.data(),
                                            HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0)
    throw_hwloc("hwloc_distances_get_by_type(NUMANODE) for " + where, errno);
  all.resize(nr);
  struct releaser {
    hwloc_topology_t t;
    std::vector<hwloc_distances_s*>& all;
    ~releaser() {
      for (auto* d : all) hwloc_distances_release(t, d);
    }
  } guard{t, all};

  std::stable_partition(all.begin(), all.end(), [](const hwloc_distances_s* d) {
    return (d->kind & HWLOC_DISTANCES_KIND_FROM_OS) != 0;
  });
  std::vector<std::vector<std::uint32_t>> out;
  for (const auto* d : all) {
    if (d->nbobjs != nodes.size()) {
      log().debug("{}: skipping a {} NUMA latency matrix of {} nodes (topology has {})", where,
                  kind_name(d->kind), d->nbobjs, nodes.size());
      continue;
    }
    // The matrix's object order is its own; re-index it to ascending os_index.
    std::vector<std::size_t> pos(nodes.size(), nodes.size());
    for (unsigned k = 0; k < d->nbobjs; ++k) {
      auto it = std::find(nodes.begin(), nodes.end(), d->objs[k]);
      if (it != nodes.end()) pos[static_cast<std::size_t>(it - nodes.begin())] = k;
    }
    bool usable =
        std::none_of(pos.begin(), pos.end(), [&](std::size_t p) { return p == nodes.size(); });
    std::vector<std::vector<std::uint32_t>> m(nodes.size(),
                                              std::vector<std::uint32_t>(nodes.size()));
    for (std::size_t i = 0; usable && i < nodes.size(); ++i)
      for (std::size_t j = 0; usable && j < nodes.size(); ++j) {
        const hwloc_uint64_t v = d->values[pos[i] * d->nbobjs + pos[j]];
        usable = v <= std::numeric_limits<std::uint32_t>::max();
        m[i][j] = static_cast<std::uint32_t>(v);
      }
    if (usable) {
      log().debug("{}: NUMA distances from the {} latency matrix", where, kind_name(d->kind));
      out = std::move(m);
      break;
    }
  }

  if (out.empty() && nodes.size() == 1) return {{10}};
  if (out.empty())
    log().info("{}: hwloc has no NUMA latency matrix covering all {} nodes; distances unknown",
               where, nodes.size());
  return out;
}

numa_topology convert(hwloc_topology_t t, const std::string& where, bool live) {
  std::vector<hwloc_obj_t> objs;
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr); o != nullptr;
       o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o))
    objs.push_back(o);
  std::sort(objs.begin(), objs.end(),
            [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });

  const bool libnuma = live && numa_available() >= 0;
  const auto cpus = owned_cpus(objs);
  numa_topology out;
  for (std::size_t i = 0; i < objs.size(); ++i) {
    numa_node n;
    n.os_index = static_cast<int>(objs[i]->os_index);
    n.cpus = cpus[i];
    n.memory_total_bytes = objs[i]->attr->numanode.local_memory;
    if (libnuma) {
      long long free_bytes = 0;
      if (numa_node_size64(n.os_index, &free_bytes) >= 0 && free_bytes >= 0)
        n.memory_free_bytes = static_cast<std::uint64_t>(free_bytes);
    }
    if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, objs[i]))
      n.package = static_cast<int>(pkg->os_index);
    out.nodes.push_back(std::move(n));
  }
  out.distances = numa_distances(t, objs, where);
  return out;
}

[[noreturn]] void throw_rejected(const fs::path& file, int err) {
  throw_error(errc::parse_error,
              "hwloc XML '" + file.string() + "' was rejected by hwloc (" + std::strerror(err) +
                  "); it must be an hwloc v2 XML export (`lstopo --of xml`); set "
                  "HWLOC_XML_VERBOSE=1 to see hwloc's parser messages");
}

}  // namespace

numa_topology load_hwloc_live() {
  topology_ptr t = make_topology();
  if (hwloc_topology_load(t.get()) != 0) throw_hwloc("hwloc_topology_load (this machine)", errno);
  // HWLOC_XMLFILE, HWLOC_FSROOT or HWLOC_SYNTHETIC in the environment redirect hwloc.
  if (!hwloc_topology_is_thissystem(t.get()))
    log().warn(
        "hwloc's environment (HWLOC_XMLFILE, HWLOC_FSROOT, HWLOC_SYNTHETIC) makes it "
        "describe another machine than this one; the NUMA view is not this system's");
  return convert(t.get(), "this machine", true);
}

numa_topology load_hwloc_xml(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw_error(errc::not_found, "hwloc XML '" + file.string() +
                                     "' does not exist or is not a file; export one with "
                                     "`lstopo --of xml <file>`");
  // hwloc checks the file already in set_xml, and again when it builds the tree in load.
  topology_ptr t = make_topology();
  if (hwloc_topology_set_xml(t.get(), file.c_str()) != 0) throw_rejected(file, errno);
  if (hwloc_topology_load(t.get()) != 0) throw_rejected(file, errno);
  return convert(t.get(), file.string(), false);
}

}  // namespace umem::numa
