#include "umem/importers/rocminfo_importer.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "text_scan.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"

// Note [rocminfo layout]
// rocminfo pads labels to 25 columns and indents 2 spaces per level:
//   0 spaces: "=====" banners and their titles, system attributes, the "*******" / "Agent N" /
//             "*******" agent header, "*** Done ***"
//   2 spaces: agent keys; "Cache Info:", "... per Dimension:", "Pool Info:" and "ISA Info:"
//             open a block of deeper lines
//   4 spaces: cache levels ("L1: ..."), dimension rows ("x   1024(0x400)"), "Pool N", "ISA N"
//   6 spaces: pool keys and ISA keys
//   8 spaces: an ISA's dimension rows
// ROCm versions differ in which keys exist (Runtime Ext Version, Memory Properties, Alloc
// Recommended Granule, Coherent Host Access, XNACK enabled, VMM Support) and in whether values
// are right-padded. So the parser keys on indentation and labels, trims values, and treats
// every key as optional except the three that identify an agent. A label ends at the first ':'
// (labels never contain one; values may: "Name: AMD Proto Sample : SH5-MI300A-A0").
//
// Note [Incomplete pool blocks]
// A capture can be cut (a paste limit, a crashed rocminfo) right after a "Pool N" header or in
// the middle of its keys. Such a pool is not added with default values: "Accessible by all"
// defaulting to FALSE, or a missing Size, would be a guess the allocator then trusts. It is
// reported in `unrecognized` on its "Pool N" line, naming the keys it lacks. An agent that lacks
// Name, Node or Device Type cannot be placed at all, so that is a parse error instead.

namespace umem::importers {
namespace {

using detail::quote;
using detail::text_line;
using detail::trim;

constexpr std::size_t agent_indent = 2;
constexpr std::size_t block_indent = 4;
constexpr std::size_t field_indent = 6;
constexpr std::size_t row_indent = 8;

// Keys rocminfo prints that umem does not model. They are listed, not inferred, so that a key
// nobody has seen before is reported instead of silently skipped.
constexpr std::array<std::string_view, 4> skipped_system_keys = {
    "System Timestamp Freq.", "Sig. Max Wait Duration", "Machine Model", "System Endianness"};
// clang-format off
constexpr std::array<std::string_view, 24> skipped_agent_keys = {
    "Feature", "Profile", "Float Round Mode", "Max Queue Number", "Queue Min Size",
    "Queue Max Size", "Queue Type", "ASIC Revision", "Cacheline Size", "Max Clock Freq. (MHz)",
    "Internal Node ID", "Shader Arrs. per Eng.", "WatchPts on Addr. Ranges", "Features",
    "Fast F16 Operation", "Wavefront Size", "Workgroup Max Size", "Max Waves Per CU",
    "Max Work-item Per CU", "Grid Max Size", "Max fbarriers/Workgrp", "Packet Processor uCode",
    "SDMA engine uCode", "IOMMU Support"};
// clang-format on
constexpr std::array<std::string_view, 7> skipped_isa_keys = {
    "Machine Models",     "Profiles",      "Default Rounding Mode", "Fast f16",
    "Workgroup Max Size", "Grid Max Size", "FBarrier Max Size"};
constexpr std::array<std::string_view, 2> dimension_keys = {"Workgroup Max Size per Dimension",
                                                            "Grid Max Size per Dimension"};
constexpr std::array<std::string_view, 3> required_agent_keys = {"Name", "Node", "Device Type"};
constexpr std::array<std::string_view, 6> required_pool_keys = {
    "Segment", "Size", "Allocatable", "Alloc Granule", "Alloc Alignment", "Accessible by all"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

struct key_value {
  std::string_view key, value;
};

std::optional<key_value> split_key_value(std::string_view body) {
  const std::size_t colon = body.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view key = trim(body.substr(0, colon));
  if (key.empty()) return std::nullopt;
  return key_value{key, trim(body.substr(colon + 1))};
}

// "=====" banners and "*******" agent frames.
bool is_rule(std::string_view s, char c) {
  return s.size() >= 3 && std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

// "x                        1024(0x400)"
bool is_dimension_row(std::string_view body) {
  return body.size() >= 2 && (body[0] == 'x' || body[0] == 'y' || body[0] == 'z') && body[1] == ' ';
}

// "N(0xH)" with N decimal and H the same number in hex; `rest` receives what follows ')'.
std::optional<std::uint64_t> parse_dec_hex(std::string_view s, std::string_view& rest) {
  const std::size_t open = s.find("(0x");
  const std::size_t close = s.find(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  auto dec = detail::parse_u64(s.substr(0, open));
  auto hex = detail::parse_hex_u64(s.substr(open + 3, close - open - 3));
  if (!dec || !hex || *dec != *hex) return std::nullopt;
  rest = s.substr(close + 1);
  return dec;
}

enum class section { preamble, untitled, system, agents, done };
enum class agent_block { none, cache_info, dimensions, pool_info, isa_info };

using seen_keys = std::map<std::string, int, std::less<>>;  // key -> line it appeared on

struct pool_draft {
  int line = 0;
  std::string text;
  memory_pool pool;
  seen_keys seen;
};

struct agent_draft {
  int line = 0;
  std::string title;  // "Agent 3"
  agent value;
  seen_keys seen;
  agent_block block = agent_block::none;
  std::optional<pool_draft> pool;
  bool in_isa = false;          // an "ISA N" header opened the current ISA
  bool isa_dimensions = false;  // the last ISA key opened x/y/z rows
};

class rocminfo_parser {
 public:
  explicit rocminfo_parser(const std::string& origin) : origin_(origin) {}

  rocminfo_import run(std::string_view text) {
    if (detail::is_blank(text))
      throw_error(errc::parse_error,
                  origin_ + ": empty input; expected the text printed by `rocminfo`");
    const auto lines = detail::split_lines(text);
    detail::require_utf8(lines, origin_);
    for (const auto& l : lines) line(l);
    finish_agent();
    if (out_.topo.agents.empty())
      throw_error(errc::parse_error,
                  origin_ +
                      ": no 'Agent N' block found; expected the text printed by "
                      "`rocminfo` (was the capture cut before the agents, or is it "
                      "another tool's output?)");
    out_.topo.sources = {"rocminfo:" + origin_};
    out_.topo.hsa.state = runtime_state::imported;
    out_.topo.hsa.state_reason = "imported from rocminfo text " + origin_;
    log().debug("rocminfo import {}: {} agents, {} unrecognized lines", origin_,
                out_.topo.agents.size(), out_.unrecognized.size());
    return std::move(out_);
  }

 private:
  void line(const text_line& l) {
    const std::string_view raw = detail::trim_right(l.text);
    if (raw.empty()) return;
    if (section_ == section::done) return unrecognized(l, "text after '*** Done ***'");
    if (section_ == section::preamble && !is_rule(raw, '=') && !is_rule(raw, '*'))
      return preamble_line(l, raw);
    const std::size_t indent = detail::indent_of(raw);
    const std::string_view body = raw.substr(indent);
    if (body.front() == '\t') return unrecognized(l, "tab indentation (rocminfo uses spaces)");
    switch (indent) {
      case 0: return top_level(l, body);
      case agent_indent: return agent_line(l, body);
      case block_indent: return block_line(l, body);
      case field_indent: return field_line(l, body);
      case row_indent: return row_line(l, body);
      default: return unrecognized(l, "indentation that rocminfo does not produce");
    }
  }

  void preamble_line(const text_line& l, std::string_view raw) {
    // Capture annotations ("# Source: ..."), the shell prompt that ran rocminfo, and rocminfo's
    // own first lines ("ROCk module version 6.12.0 is loaded", possibly in ANSI colour).
    if (raw.starts_with('#') || raw.find("rocminfo") != std::string_view::npos ||
        raw.find("ROCk module") != std::string_view::npos ||
        raw.find("WSL environment detected") != std::string_view::npos)
      return;
    unrecognized(l, "text before rocminfo's first banner");
  }

  void top_level(const text_line& l, std::string_view body) {
    if (is_rule(body, '=')) {
      if (section_ == section::preamble) section_ = section::untitled;
      return;
    }
    if (body == "HSA System Attributes") {
      finish_agent();
      section_ = section::system;
      return;
    }
    if (body == "HSA Agents") {
      finish_agent();
      section_ = section::agents;
      return;
    }
    if (is_rule(body, '*')) {  // a partial capture may begin at an agent header
      section_ = section::agents;
      return;
    }
    if (body == "*** Done ***") {
      finish_agent();
      section_ = section::done;
      return;
    }
    if (section_ == section::agents && body.starts_with("Agent ")) {
      if (!detail::parse_u32(trim(body.substr(6))))
        detail::fail_at(origin_, l.number,
                        "expected an agent header 'Agent <number>', found " + quote(body));
      finish_agent();
      agent_.emplace();
      agent_->line = l.number;
      agent_->title = std::string(body);
      return;
    }
    if (section_ == section::system) {
      if (auto kv = split_key_value(body)) return system_key(l, *kv);
      return unrecognized(l, "expected 'Key: value' in the system attributes");
    }
    unrecognized(l, "not part of rocminfo's layout");
  }

  void system_key(const text_line& l, key_value kv) {
    auto& hsa = out_.topo.hsa;
    if (listed(skipped_system_keys, kv.key)) return;
    if (kv.key == "Runtime Version") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      std::tie(hsa.version_major, hsa.version_minor) = version(l, kv);
    } else if (kv.key == "Runtime Ext Version") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      std::tie(hsa.ext_version_major, hsa.ext_version_minor) = version(l, kv);
    } else if (kv.key == "XNACK enabled") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      hsa.xnack_enabled = flag(l, kv, "YES", "NO");
    } else if (kv.key == "DMAbuf Support") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      hsa.dmabuf_supported = flag(l, kv, "YES", "NO");
    } else if (kv.key == "VMM Support") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      hsa.virtual_mem_api_supported = flag(l, kv, "YES", "NO");
    } else if (kv.key == "Mwaitx") {
      mark_seen(system_seen_, l, kv.key, "the system attributes");
      hsa.mwaitx_enabled = flag(l, kv, "ENABLED", "DISABLED");
    } else {
      unrecognized(l, "unknown system attribute " + quote(kv.key));
    }
  }

  void agent_line(const text_line& l, std::string_view body) {
    if (!agent_) return unrecognized(l, "agent field outside an 'Agent N' block");
    finish_pool();
    agent_->block = agent_block::none;
    agent_->in_isa = false;
    agent_->isa_dimensions = false;
    auto kv = split_key_value(body);
    if (!kv) return unrecognized(l, "expected 'Key: value'");
    agent_key(l, *kv);
  }

  void agent_key(const text_line& l, key_value kv) {
    agent& a = agent_->value;
    const std::string_view k = kv.key;
    if (listed(skipped_agent_keys, k)) return;
    if (k == "Cache Info") {
      agent_->block = agent_block::cache_info;
      return;
    }
    if (listed(dimension_keys, k)) {
      agent_->block = agent_block::dimensions;
      return;
    }
    if (k == "Pool Info") {
      agent_->block = agent_block::pool_info;
      return;
    }
    if (k == "ISA Info") {
      agent_->block = agent_block::isa_info;
      return;
    }
    const bool modelled = k == "Name" || k == "Uuid" || k == "Marketing Name" ||
                          k == "Vendor Name" || k == "Node" || k == "Device Type" ||
                          k == "Chip ID" || k == "BDFID" || k == "Compute Unit" ||
                          k == "SIMDs per CU" || k == "Shader Engines" ||
                          k == "Coherent Host Access" || k == "Memory Properties";
    if (!modelled) return unrecognized(l, "unknown agent key " + quote(k));
    mark_seen(agent_->seen, l, k, agent_->title);
    if (k == "Name")
      a.name = std::string(kv.value);
    else if (k == "Uuid")
      a.uuid = std::string(kv.value);
    else if (k == "Marketing Name")
      a.marketing_name = std::string(kv.value);
    else if (k == "Vendor Name")
      a.vendor_name = std::string(kv.value);
    else if (k == "Node")
      a.kfd_node = u32(l, kv, "a decimal KFD node id");
    else if (k == "Device Type")
      a.kind = device_type(l, kv);
    else if (k == "Chip ID")
      a.chip_id = dec_hex_u32(l, kv);
    else if (k == "BDFID")
      a.bdfid = u32(l, kv, "a decimal PCI bus/device/function id");
    else if (k == "Compute Unit")
      a.compute_units = u32(l, kv, "a decimal count");
    else if (k == "SIMDs per CU")
      a.simds_per_cu = u32(l, kv, "a decimal count");
    else if (k == "Shader Engines")
      a.shader_engines = u32(l, kv, "a decimal count");
    else if (k == "Coherent Host Access")
      a.coherent_host_access = flag(l, kv, "TRUE", "FALSE");
    else
      memory_properties(l, kv);
  }

  void block_line(const text_line& l, std::string_view body) {
    const agent_block block = agent_ ? agent_->block : agent_block::none;
    switch (block) {
      case agent_block::cache_info:
        if (auto kv = split_key_value(body);
            kv && kv->key.size() >= 2 && kv->key[0] == 'L' && detail::parse_u32(kv->key.substr(1)))
          return;
        return unrecognized(l, "expected a cache level 'L<n>: <size>'");
      case agent_block::dimensions:
        if (is_dimension_row(body)) return;
        return unrecognized(l, "expected an 'x', 'y' or 'z' dimension row");
      case agent_block::pool_info:
        if (body.starts_with("Pool ")) {
          if (!detail::parse_u32(trim(body.substr(5))))
            detail::fail_at(origin_, l.number,
                            "expected a pool header 'Pool <number>', found " + quote(body));
          finish_pool();
          agent_->pool.emplace();
          agent_->pool->line = l.number;
          agent_->pool->text = std::string(l.text);
          return;
        }
        return unrecognized(l, "expected 'Pool <number>'");
      case agent_block::isa_info:
        if (body.starts_with("ISA ")) {
          if (!detail::parse_u32(trim(body.substr(4))))
            detail::fail_at(origin_, l.number,
                            "expected an ISA header 'ISA <number>', found " + quote(body));
          agent_->in_isa = true;
          agent_->isa_dimensions = false;
          return;
        }
        if (body == "N/A") return;  // an agent without ISAs
        return unrecognized(l, "expected 'ISA <number>'");
      case agent_block::none: break;
    }
    unrecognized(l, "indented line not under 'Cache Info:', 'Pool Info:' or 'ISA Info:'");
  }

  void field_line(const text_line& l, std::string_view body) {
    if (agent_ && agent_->block == agent_block::pool_info && agent_->pool) {
      auto kv = split_key_value(body);
      if (!kv) return unrecognized(l, "expected 'Key: value' in a pool block");
      return pool_key(l, *kv);
    }
    if (agent_ && agent_->block == agent_block::isa_info && agent_->in_isa) {
      auto kv = split_key_value(body);
      agent_->isa_dimensions = false;
      if (!kv) return unrecognized(l, "expected 'Key: value' in an ISA block");
      if (kv->key == "Name") {
        agent_->value.isas.emplace_back(kv->value);
        return;
      }
      if (listed(dimension_keys, kv->key)) {
        agent_->isa_dimensions = true;
        return;
      }
      if (listed(skipped_isa_keys, kv->key)) return;
      return unrecognized(l, "unknown ISA key " + quote(kv->key));
    }
    unrecognized(l, "indented line not under a 'Pool N' or 'ISA N' header");
  }

  void row_line(const text_line& l, std::string_view body) {
    if (agent_ && agent_->isa_dimensions && is_dimension_row(body)) return;
    unrecognized(l, "indented line not under an ISA's '... per Dimension:' key");
  }

  void pool_key(const text_line& l, key_value kv) {
    pool_draft& d = *agent_->pool;
    memory_pool& p = d.pool;
    const std::string_view k = kv.key;
    const bool modelled = listed(required_pool_keys, k) || k == "Alloc Recommended Granule";
    if (!modelled) return unrecognized(l, "unknown pool key " + quote(k));
    mark_seen(d.seen, l, k, "this pool block");
    if (k == "Segment")
      segment(l, kv, p);
    else if (k == "Size")
      p.size_bytes = size_kb(l, kv);
    else if (k == "Allocatable")
      p.alloc_allowed = flag(l, kv, "TRUE", "FALSE");
    else if (k == "Alloc Granule")
      p.alloc_granule = kb(l, kv);
    else if (k == "Alloc Recommended Granule")
      p.alloc_rec_granule = kb(l, kv);
    else if (k == "Alloc Alignment")
      p.alloc_alignment = kb(l, kv);
    else
      p.accessible_by_all = flag(l, kv, "TRUE", "FALSE");
  }

  // See Note [Incomplete pool blocks].
  void finish_pool() {
    if (!agent_ || !agent_->pool) return;
    pool_draft d = std::move(*agent_->pool);
    agent_->pool.reset();
    std::string missing;
    for (auto key : required_pool_keys)
      if (!d.seen.contains(key))
        missing += (missing.empty() ? "'" : ", '") + std::string(key) + "'";
    if (missing.empty()) {
      agent_->value.pools.push_back(d.pool);
    } else if (d.seen.empty()) {
      out_.unrecognized.push_back({d.line, d.text,
                                   "pool header without any pool keys (the capture looks cut "
                                   "here); the pool is not imported"});
    } else {
      out_.unrecognized.push_back(
          {d.line, d.text, "pool block lacks " + missing + "; the pool is not imported"});
    }
  }

  void finish_agent() {
    if (!agent_) return;
    finish_pool();
    for (auto key : required_agent_keys)
      if (!agent_->seen.contains(key))
        detail::fail_at(origin_, agent_->line,
                        agent_->title + " has no '" + std::string(key) +
                            ":' line, so the agent cannot be identified (is the capture cut?)");
    out_.topo.agents.push_back(std::move(agent_->value));
    agent_.reset();
  }

  void mark_seen(seen_keys& seen, const text_line& l, std::string_view key,
                 const std::string& where) {
    auto [it, inserted] = seen.emplace(std::string(key), l.number);
    if (!inserted)
      detail::fail_at(origin_, l.number,
                      "'" + std::string(key) + ":' appears twice in " + where + " (first on line " +
                          std::to_string(it->second) + ")");
  }

  void unrecognized(const text_line& l, std::string message) {
    out_.unrecognized.push_back({l.number, std::string(l.text), std::move(message)});
  }

  [[noreturn]] void expected(const text_line& l, key_value kv, std::string_view what) {
    detail::fail_at(origin_, l.number,
                    "'" + std::string(kv.key) + ":' expects " + std::string(what) + ", found " +
                        quote(kv.value));
  }

  bool flag(const text_line& l, key_value kv, std::string_view yes, std::string_view no) {
    if (kv.value == yes) return true;
    if (kv.value == no) return false;
    expected(l, kv, std::string(yes) + " or " + std::string(no));
  }

  std::uint32_t u32(const text_line& l, key_value kv, std::string_view what) {
    if (auto v = detail::parse_u32(kv.value)) return *v;
    expected(l, kv, what);
  }

  std::uint32_t dec_hex_u32(const text_line& l, key_value kv) {
    std::string_view rest;
    auto v = parse_dec_hex(kv.value, rest);
    if (!v || !rest.empty() || *v > std::numeric_limits<std::uint32_t>::max())
      expected(l, kv, "'<decimal>(0x<same in hex>)'");
    return static_cast<std::uint32_t>(*v);
  }

  // "98647808(0x5e13f00) KB" -> bytes
  std::uint64_t size_kb(const text_line& l, key_value kv) {
    std::string_view rest;
    auto v = parse_dec_hex(kv.value, rest);
    if (!v || trim(rest) != "KB" || *v > std::numeric_limits<std::uint64_t>::max() / 1024)
      expected(l, kv, "'<decimal>(0x<same in hex>) KB'");
    return *v * 1024;
  }

  // "2048KB" -> bytes
  std::uint64_t kb(const text_line& l, key_value kv) {
    std::string_view v = kv.value;
    std::optional<std::uint64_t> n;
    if (v.ends_with("KB")) n = detail::parse_u64(v.substr(0, v.size() - 2));
    if (!n || *n > std::numeric_limits<std::uint64_t>::max() / 1024)
      expected(l, kv, "'<decimal>KB'");
    return *n * 1024;
  }

  std::pair<std::uint16_t, std::uint16_t> version(const text_line& l, key_value kv) {
    const std::size_t dot = kv.value.find('.');
    std::optional<std::uint32_t> major, minor;
    if (dot != std::string_view::npos) {
      major = detail::parse_u32(kv.value.substr(0, dot));
      minor = detail::parse_u32(kv.value.substr(dot + 1));
    }
    constexpr std::uint32_t max16 = std::numeric_limits<std::uint16_t>::max();
    if (!major || !minor || *major > max16 || *minor > max16) expected(l, kv, "'<major>.<minor>'");
    return {static_cast<std::uint16_t>(*major), static_cast<std::uint16_t>(*minor)};
  }

  agent_kind device_type(const text_line& l, key_value kv) {
    if (kv.value == "CPU") return agent_kind::cpu;
    if (kv.value == "GPU") return agent_kind::gpu;
    if (kv.value == "DSP") return agent_kind::other;  // rocminfo's word for every other type
    expected(l, kv, "CPU, GPU or DSP");
  }

  // rocminfo prints "APU" when HSA_AMD_MEMORY_PROPERTY_AGENT_IS_APU is set and nothing otherwise.
  void memory_properties(const text_line& l, key_value kv) {
    bool apu = false;
    std::string_view rest = kv.value;
    while (!(rest = trim(rest)).empty()) {
      const std::size_t end = std::min(rest.find(' '), rest.size());
      const std::string_view word = rest.substr(0, end);
      if (word == "APU")
        apu = true;
      else
        unrecognized(l, "unknown memory property " + quote(word) + " (not used)");
      rest.remove_prefix(end);
    }
    agent_->value.is_apu = apu;
  }

  void segment(const text_line& l, key_value kv, memory_pool& p) {
    constexpr std::string_view global = "GLOBAL; FLAGS:";
    p.global_flags = 0;
    if (kv.value == "GROUP")
      p.segment = pool_segment::group;
    else if (kv.value == "READONLY")
      p.segment = pool_segment::readonly;
    else if (kv.value == "PRIVATE")
      p.segment = pool_segment::private_;
    else if (kv.value.starts_with(global)) {
      p.segment = pool_segment::global;
      std::string_view rest = kv.value.substr(global.size());
      while (!trim(rest).empty()) {
        const std::size_t comma = std::min(rest.find(','), rest.size());
        const std::string_view word = trim(rest.substr(0, comma));
        if (word == "KERNARG")
          p.global_flags |= pool_flag::kernarg_init;
        else if (word == "FINE GRAINED")
          p.global_flags |= pool_flag::fine_grained;
        else if (word == "COARSE GRAINED")
          p.global_flags |= pool_flag::coarse_grained;
        else if (word == "EXTENDED FINE GRAINED")
          p.global_flags |= pool_flag::extended_scope_fine_grained;
        else
          expected(l, kv,
                   "flags among KERNARG, FINE GRAINED, COARSE GRAINED, EXTENDED FINE "
                   "GRAINED (unknown flag " +
                       quote(word) + ")");
        rest.remove_prefix(std::min(comma + 1, rest.size()));
      }
    } else {
      expected(l, kv, "'GLOBAL; FLAGS: ...', GROUP, READONLY or PRIVATE");
    }
  }

  const std::string& origin_;
  section section_ = section::preamble;
  std::optional<agent_draft> agent_;
  seen_keys system_seen_;
  rocminfo_import out_;
};

}  // namespace

rocminfo_import import_rocminfo(std::string_view text, const std::string& origin) {
  return rocminfo_parser(origin).run(text);
}

}  // namespace umem::importers
