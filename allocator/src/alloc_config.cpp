#include "umem/allocator/alloc_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "umem/allocator/placement_resolver.hpp"
#include "umem/core/detail/text.hpp"
#include "umem/core/error.hpp"
#include "umem/core/options.hpp"

namespace umem::alloc {
namespace {

constexpr std::string_view kPrefix = "UMEM_ALLOC_CONF: ";
constexpr std::string_view kNodeLimitKey = "limit.node";
constexpr std::string_view kDeviceLimitKey = "limit.device";

[[noreturn]] void fail(const std::string& message) {
  throw_error(errc::invalid_argument, std::string(kPrefix) + message);
}

[[noreturn]] void bad_value(std::string_view key, std::string_view value,
                            std::string_view expected) {
  fail(std::string(key) + ": '" + std::string(value) + "' is " + std::string(expected));
}

using umem::detail::trim;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);  // ASCII letters only; units are letters
         });
}

// ---- enumerations ----------------------------------------------------------------------------

template <class E>
struct named {
  std::string_view name;
  E value;
};

constexpr std::array<named<bool>, 2> kBools{{{"true", true}, {"false", false}}};

template <class E, std::size_t N>
E parse_enum(const std::array<named<E>, N>& names, std::string_view key, std::string_view value) {
  for (const auto& n : names)
    if (n.name == value) return n.value;
  std::string accepted;
  for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + std::string(n.name);
  bad_value(key, value, "not one of " + accepted);
}

template <class E, std::size_t N>
std::string_view enum_name(const std::array<named<E>, N>& names, E value) {
  for (const auto& n : names)
    if (n.value == value) return n.name;
  return "?";  // unreachable for values the parser produced (coherence::unknown aside)
}

// The placement resolver's parsers (one text form for each policy), their errors prefixed with
// the key.
template <class F>
auto with_key(std::string_view key, F parse) {
  try {
    return parse();
  } catch (const umem::error& e) {
    fail(std::string(key) + ": " + e.what());
  }
}

// ---- sizes and fractions (Note [Sizes and fractions]) -----------------------------------------

struct unit {
  std::string_view name;
  std::uint64_t bytes;
};
constexpr std::array<unit, 5> kUnits{{{"TiB", 1ull << 40},
                                      {"GiB", 1ull << 30},
                                      {"MiB", 1ull << 20},
                                      {"KiB", 1ull << 10},
                                      {"B", 1}}};

struct size_text {
  std::string_view number;  // digits, optionally '.' digits
  std::string_view unit;    // empty for a bare number
};

std::optional<size_text> split_size(std::string_view v) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < v.size() && v[i] >= '0' && v[i] <= '9') ++i;
    return i > start;
  };
  if (!digits()) return std::nullopt;
  if (i < v.size() && v[i] == '.') {
    ++i;
    if (!digits()) return std::nullopt;
  }
  return size_text{v.substr(0, i), trim(v.substr(i))};
}

// Whole bytes of "<number><unit>", rounding a fractional result down; nullopt on overflow.
std::optional<std::uint64_t> to_bytes(std::string_view number, std::uint64_t multiplier) {
  if (number.find('.') == std::string_view::npos) {
    std::uint64_t n = 0;
    const auto r = std::from_chars(number.data(), number.data() + number.size(), n);
    if (r.ec != std::errc{} || n > std::numeric_limits<std::uint64_t>::max() / multiplier)
      return std::nullopt;
    return n * multiplier;
  }
  long double n = 0;
  const auto r = std::from_chars(number.data(), number.data() + number.size(), n);
  const long double bytes = std::floor(n * static_cast<long double>(multiplier));
  if (r.ec != std::errc{} ||
      bytes >= static_cast<long double>(std::numeric_limits<std::uint64_t>::max()))
    return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

// A size with a unit; with `bare_zero`, also a bare "0".
std::uint64_t parse_size(std::string_view key, std::string_view value, std::string_view hint,
                         bool bare_zero) {
  const auto parts = split_size(value);
  if (!parts) bad_value(key, value, "not a size (use e.g. " + std::string(hint) + ")");
  if (parts->unit.empty()) {
    if (bare_zero && to_bytes(parts->number, 1) == 0u) return 0;
    bad_value(key, value,
              "a bare number; sizes need a unit: B, KiB, MiB, GiB or TiB (e.g. " +
                  std::string(hint) + ")");
  }
  for (const auto& u : kUnits) {
    if (!iequals(parts->unit, u.name)) continue;
    const auto bytes = to_bytes(parts->number, u.bytes);
    if (!bytes) bad_value(key, value, "too large");
    return *bytes;
  }
  bad_value(key, value,
            "not a size (use e.g. " + std::string(hint) +
                "; units are B, KiB, MiB, GiB, TiB: powers of 1024)");
}

std::optional<memory_limit> parse_limit(std::string_view key, std::string_view value) {
  if (value == "none") return std::nullopt;
  constexpr std::string_view hint = "64GiB or 0.5";
  const auto parts = split_size(value);
  if (!parts) bad_value(key, value, "not a size (use e.g. " + std::string(hint) + ")");
  if (!parts->unit.empty()) {
    const std::uint64_t bytes = parse_size(key, value, hint, false);
    if (bytes == 0) bad_value(key, value, "zero; omit the key (or use 'none') for no limit");
    return memory_limit{bytes, std::nullopt};
  }
  double f = 0;
  const auto r = std::from_chars(parts->number.data(), parts->number.data() + parts->number.size(),
                                 f);
  if (r.ec != std::errc{} || !(f > 0.0 && f <= 1.0))
    bad_value(key, value,
              "not a fraction 0 < f <= 1 of the memory (sizes need a unit, e.g. " +
                  std::string(hint) + ")");
  return memory_limit{0, f};
}

std::string size_string(std::uint64_t bytes) {
  if (bytes == 0) return "0";
  for (const auto& u : kUnits)
    if (bytes % u.bytes == 0) return std::to_string(bytes / u.bytes) + std::string(u.name);
  return std::to_string(bytes) + "B";  // unreachable: B divides everything
}

std::string limit_string(const std::optional<memory_limit>& l) {
  if (!l) return "none";
  if (!l->fraction) return size_string(l->bytes);
  // Fixed notation: the parser takes no exponent; shortest form that reads back exactly. A
  // fraction 0 < f <= 1 as small as the smallest subnormal double takes "0." and up to 324 + 17
  // digits, so the buffer holds every one the parser accepts.
  std::array<char, 2 + 324 + std::numeric_limits<double>::max_digits10 + 8> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), *l->fraction,
                               std::chars_format::fixed);
  if (r.ec != std::errc{})
    throw_error(errc::internal, "limit_string: the fraction does not fit " +
                                    std::to_string(buf.size()) + " characters");
  return std::string(buf.data(), r.ptr);
}

// limit.node<N> -> N, limit.device<D> -> D.
int index_of_key(std::string_view key, std::string_view prefix) {
  const std::string_view digits = key.substr(prefix.size());
  int n = -1;
  const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || r.ec != std::errc{} || r.ptr != digits.data() + digits.size() || n < 0)
    fail("'" + std::string(key) + "' needs a " +
         (prefix == kNodeLimitKey ? "NUMA node number after limit.node (e.g. limit.node0:64GiB)"
                                  : "GPU index after limit.device (e.g. limit.device0:100GiB)"));
  return n;
}

// limit.node<N> or limit.device<D> set or cleared ("none") in `limits`.
void apply_indexed_limit(std::map<int, memory_limit>& limits, std::string_view prefix,
                         std::string_view k, std::string_view v);

void print_indexed_limits(const std::map<int, memory_limit>& limits, std::string_view prefix,
                          std::vector<std::string>& items);

void apply_indexed_limit(std::map<int, memory_limit>& limits, std::string_view prefix,
                         std::string_view k, std::string_view v) {
  const int index = index_of_key(k, prefix);
  if (auto l = parse_limit(k, v))
    limits[index] = *l;
  else
    limits.erase(index);
}

void print_indexed_limits(const std::map<int, memory_limit>& limits, std::string_view prefix,
                          std::vector<std::string>& items) {
  for (const auto& [index, l] : limits)
    items.push_back(std::string(prefix) + std::to_string(index) + ":" + limit_string(l));
}

// ---- the table -------------------------------------------------------------------------------

using apply_fn = void (*)(alloc_options&, std::string_view key, std::string_view value);
using print_fn = void (*)(const alloc_options&, std::vector<std::string>& items);

struct option_row {
  alloc_option_doc doc;
  apply_fn apply;
  print_fn print;
};

constexpr std::array kRows{
    option_row{{"policy", "local | node:N | device:D | interleave:SET", "local",
                "Where fresh memory is placed: the calling thread's node, NUMA node N, the node of "
                "GPU D (in topology order), or interleaved over SET (e.g. 0-3, 0,2 or all)."},
               [](alloc_options& o, std::string_view, std::string_view v) {
                 o.policy = with_key("policy", [v] { return parse_placement(v); });
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("policy:" + to_string(o.policy));
               }},
    option_row{{"spill", "never | warn | allow", "never",
                "When the chosen node is exhausted or over its limit: fail (never), take the "
                "nearest other node and log it (warn), or take it silently (allow)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.spill = with_key(k, [v] { return parse_spill_policy(v); });
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("spill:" + std::string(to_string(o.spill)));
               }},
    option_row{{"kind", "fine | coarse | extended_fine", "fine",
                "CPU-GPU coherence of GPU-visible memory: fine (coherent during kernels), coarse "
                "(coherent at synchronization points; full GPU L2 use), extended_fine (adds "
                "system-scope atomics)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.kind = with_key(k, [&] { return parse_coherence(v); });
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("kind:" + std::string(to_string(o.kind)));
               }},
    option_row{{"device_kind", "fine | coarse | extended_fine", "coarse",
                "Coherence of device:D placements served from host memory: a unified GPU's "
                "device memory (PyTorch's device tensors on an APU). coarse, as hipMalloc gives: "
                "kernels need no CPU coherence while they run, and fine-grained memory is "
                "reported 3-8x slower for kernels that re-read data on an AMD APU. `kind` "
                "applies to every other placement (host tensors, zero-copy aliases)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.device_kind = with_key(k, [&] { return parse_coherence(v); });
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("device_kind:" + std::string(to_string(o.device_kind)));
               }},
    option_row{{"huge_pages", "true | false", "true",
                "Advise transparent huge pages (MADV_HUGEPAGE) on fresh 2 MiB-aligned segments; "
                "4 KiB pages cost GPU TLB reach."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.huge_pages = parse_enum(kBools, k, v);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("huge_pages:" + std::string(enum_name(kBools, o.huge_pages)));
               }},
    option_row{{"populate", "none | touch | map_populate", "none",
                "Back fresh segments before first use: lazily on first touch (none), by touching "
                "them on the target node (touch), or with MAP_POPULATE (map_populate)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.populate = with_key(k, [v] { return parse_populate_mode(v); });
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("populate:" + std::string(to_string(o.populate)));
               }},
    option_row{{"limit.total", "size | fraction | none", "none",
                "Most memory the allocator may hold over all nodes: a size (e.g. 400GiB) or a "
                "fraction 0 < f <= 1 of the machine's memory (e.g. 0.9)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.limit_total = parse_limit(k, v);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("limit.total:" + limit_string(o.limit_total));
               }},
    option_row{{"limit.node<N>", "size | fraction | none", "none",
                "Most memory the allocator may hold on NUMA node N: a size (e.g. 64GiB) or a "
                "fraction 0 < f <= 1 of that node's memory (e.g. 0.5); one key per node."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 apply_indexed_limit(o.limit_node, kNodeLimitKey, k, v);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 print_indexed_limits(o.limit_node, kNodeLimitKey, items);
               }},
    option_row{{"limit.device<D>", "size | fraction | none", "none",
                "Most of discrete GPU D's own memory the allocator may hold (device:D placements "
                "served from it; D as in device:D): a size (e.g. 100GiB) or a fraction 0 < f <= 1 "
                "of the GPU's memory. A unified GPU's device memory is its NUMA node's: limit it "
                "with limit.node<N>."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 apply_indexed_limit(o.limit_device, kDeviceLimitKey, k, v);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 print_indexed_limits(o.limit_device, kDeviceLimitKey, items);
               }},
    option_row{{"max_cached", "size | 0", "0",
                "Most free memory the cache keeps: above it frees return whole free segments, "
                "and before the pool takes more memory it gives back free pages inside its "
                "segments where the source can (pageable host memory, ROCr with XNACK on, a "
                "discrete NVIDIA GPU's growable segments; not pinned GPU memory). 0 means no "
                "cap (memory is returned by trim() or when an allocation fails)."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.max_cached = parse_size(k, v, "8GiB or 0 for no cap", true);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("max_cached:" + size_string(o.max_cached));
               }},
    option_row{{"expandable_segments", "true | false", "true",
                "Large requests that no free block fits grow one segment in place (reserving "
                "address space, not memory) instead of taking a new segment, so cached memory "
                "at its end is not stranded. Under an address-space limit (ulimit -v) a host "
                "segment reserves what the limit leaves."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.expandable_segments = parse_enum(kBools, k, v);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("expandable_segments:" +
                                 std::string(enum_name(kBools, o.expandable_segments)));
               }},
    option_row{{"thread_cache", "size | 0", "64MiB",
                "Most freed memory each thread keeps per host pool for its own reuse without "
                "taking the pool's lock (blocks up to 64 MiB); 0 turns thread caches off, which "
                "also makes peak statistics exact (otherwise they may include what the thread "
                "caches held). Pools of a GPU's own memory keep none: blocks held per thread "
                "made them reserve more at the peak of real training."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.thread_cache = parse_size(k, v, "64MiB or 0 for none", true);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("thread_cache:" + size_string(o.thread_cache));
               }},
    option_row{{"foreign_alias_min", "size | 0", "4MiB",
                "Where the GPU cannot reach memory umem did not allocate (XNACK off on an APU), "
                "a zero-copy alias of it (zero_copy(), as_device) registers it with the GPU "
                "runtime, pinning its pages, from this size up; smaller tensors are copied, as a "
                "registration costs more than a copy there and its release waits for the GPU. "
                "0 registers every size."},
               [](alloc_options& o, std::string_view k, std::string_view v) {
                 o.foreign_alias_min = parse_size(k, v, "4MiB or 0 for every size", true);
               },
               [](const alloc_options& o, std::vector<std::string>& items) {
                 items.push_back("foreign_alias_min:" + size_string(o.foreign_alias_min));
               }},
};

constexpr auto kDocs = [] {
  std::array<alloc_option_doc, kRows.size()> docs{};
  for (std::size_t i = 0; i < kRows.size(); ++i) docs[i] = kRows[i].doc;
  return docs;
}();

const option_row* find_row(std::string_view key) {
  for (const auto& r : kRows)
    if (r.doc.key == key || (r.doc.key == "limit.node<N>" && key.starts_with(kNodeLimitKey)) ||
        (r.doc.key == "limit.device<D>" && key.starts_with(kDeviceLimitKey)))
      return &r;
  return nullptr;
}

std::string known_keys() {
  std::string out;
  for (const auto& r : kRows) out += (out.empty() ? "" : ", ") + std::string(r.doc.key);
  return out;
}

struct item {
  std::string key;
  std::string value;
};

// Note [How UMEM_ALLOC_CONF is split].
std::vector<item> split_items(std::string_view text) {
  std::vector<item> items;
  for (;;) {
    const auto comma = text.find(',');
    const std::string_view raw = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (!raw.empty()) {
      const auto colon = raw.find(':');
      if (colon != std::string_view::npos) {
        items.push_back({std::string(trim(raw.substr(0, colon))),
                         std::string(trim(raw.substr(colon + 1)))});
      } else if (!items.empty() && items.back().key == "policy") {
        items.back().value += "," + std::string(raw);  // an interleave set: interleave:0,2
      } else {
        fail("'" + std::string(raw) + "' is not key:value (known keys: " + known_keys() + ")");
      }
    }
    if (comma == std::string_view::npos) break;
  }
  return items;
}

}  // namespace

std::span<const alloc_option_doc> alloc_option_table() { return kDocs; }

alloc_options parse_alloc_conf(std::string_view text, alloc_options base) {
  std::set<std::string> seen;
  for (const auto& [key, value] : split_items(text)) {
    const option_row* row = find_row(key);
    if (row == nullptr) fail("unknown key '" + key + "' (known: " + known_keys() + ")");
    std::string canonical = key;
    for (std::string_view prefix : {kNodeLimitKey, kDeviceLimitKey})
      if (key.starts_with(prefix))
        canonical = std::string(prefix) + std::to_string(index_of_key(key, prefix));
    if (!seen.insert(canonical).second)
      fail("key '" + canonical + "' is given more than once; give each key once");
    row->apply(base, key, value);
  }
  return base;
}

alloc_options options_from_environment() {
  const auto conf = env_value("UMEM_ALLOC_CONF");
  return conf ? parse_alloc_conf(*conf) : alloc_options{};
}

std::string describe(const alloc_options& options) {
  std::vector<std::string> items;
  for (const auto& r : kRows) r.print(options, items);
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

std::uint64_t limit_bytes_of(const memory_limit& l, std::uint64_t memory) {
  if (!l.fraction) return l.bytes;
  return static_cast<std::uint64_t>(
      std::floor(static_cast<long double>(*l.fraction) * static_cast<long double>(memory)));
}

resolved_limits resolve_limits(const alloc_options& options, const numa_topology& numa) {
  resolved_limits out;
  if (const auto& t = options.limit_total) {
    std::uint64_t machine = 0;
    for (const auto& n : numa.nodes) machine += n.memory_total_bytes;
    if (t->fraction && machine == 0)
      fail("limit.total: the fraction " + limit_string(t) +
           " needs the machine's memory size, which the topology does not know; give a size "
           "(e.g. 400GiB)");
    out.total_bytes = limit_bytes_of(*t, machine);
  }
  for (const auto& entry : options.limit_node) {
    const int index = entry.first;  // not a structured binding: clang < 16 cannot capture one
    const auto& l = entry.second;
    const std::string key = std::string(kNodeLimitKey) + std::to_string(index);
    const auto node = std::find_if(numa.nodes.begin(), numa.nodes.end(),
                                   [&](const numa_node& n) { return n.os_index == index; });
    if (node == numa.nodes.end()) {
      std::string nodes;
      for (const auto& n : numa.nodes)
        nodes += (nodes.empty() ? "" : ", ") + std::to_string(n.os_index);
      fail(key + ": this machine has no NUMA node " + std::to_string(index) + " (its nodes: " +
           (nodes.empty() ? std::string("none known") : nodes) + ")");
    }
    if (l.fraction && node->memory_total_bytes == 0)
      fail(key + ": the fraction " + limit_string(l) + " needs node " + std::to_string(index) +
           "'s memory size, which the topology does not know; give a size (e.g. 64GiB)");
    out.node_bytes[index] = limit_bytes_of(l, node->memory_total_bytes);
  }
  return out;
}

}  // namespace umem::alloc
