#include <algorithm>
#include <optional>

#include "kfd_properties_text.hpp"
#include "umem/core/error.hpp"
#include "umem/core/detail/log.hpp"
#include "umem/hsa_runtime/kfd_topology.hpp"

namespace umem::hsa {
namespace {

using namespace detail;

bool is_separator(std::string_view line) {
  return line.size() >= 3 && line.find_first_not_of('-') == std::string_view::npos;
}

// "*" or "<N>" when `line` is a command naming topology/nodes/{*,<N>}/properties.
std::optional<std::string_view> properties_command_target(std::string_view line) {
  constexpr std::string_view anchor = "topology/nodes/";
  constexpr std::string_view suffix = "/properties";
  const auto at = line.find(anchor);
  if (at == std::string_view::npos || !line.ends_with(suffix)) return std::nullopt;
  const std::size_t begin = at + anchor.size();
  if (begin + suffix.size() > line.size()) return std::nullopt;
  const std::string_view target = line.substr(begin, line.size() - suffix.size() - begin);
  if (target == "*" || all_digits(target)) return target;
  return std::nullopt;
}

// The node ids `cat nodes/*/properties` visits, in order: the shell sorts names as text.
std::vector<std::uint32_t> glob_order(std::size_t count) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < count; ++i) names.push_back(std::to_string(i));
  std::sort(names.begin(), names.end());
  std::vector<std::uint32_t> ids;
  for (const std::string& n : names) ids.push_back(static_cast<std::uint32_t>(std::stoul(n)));
  return ids;
}

bool skippable(std::string_view line) { return line.empty() || line.starts_with('#'); }

}  // namespace

std::vector<kfd_node> import_kfd_properties_dump(std::string_view text, const std::string& origin) {
  const std::vector<numbered_line> lines = split_lines(text);

  std::optional<std::size_t> command;  // index into lines
  std::string_view target = "*";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (skippable(lines[i].text)) continue;
    const auto t = properties_command_target(lines[i].text);
    if (!t) continue;
    if (command)
      throw_error(errc::parse_error,
                  origin + ":" + std::to_string(lines[i].number) + ": a second properties "
                  "command (the first is at line " + std::to_string(lines[*command].number) +
                  "); import one dump at a time");
    command = i;
    target = *t;
  }

  std::size_t begin = 0;
  if (command) {
    begin = *command + 1;
    const auto first = std::find_if(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(*command),
                                    [](const numbered_line& l) { return !skippable(l.text); });
    if (first != lines.begin() + static_cast<std::ptrdiff_t>(*command))
      log().debug("{}: lines {}-{} precede the properties command and are not part of the dump",
                  origin, first->number, lines[*command].number - 1);
  }
  const bool separated = std::any_of(lines.begin() + static_cast<std::ptrdiff_t>(begin), lines.end(),
                                     [](const numbered_line& l) { return is_separator(l.text); });

  struct block {
    std::size_t first_line = 0;
    std::map<std::string, std::uint64_t> props;
  };
  std::vector<block> blocks;
  std::string first_key;
  bool open = false;
  for (std::size_t i = begin; i < lines.size(); ++i) {
    const numbered_line& line = lines[i];
    if (skippable(line.text)) continue;
    if (is_separator(line.text)) {
      open = false;
      continue;
    }
    property p;
    const line_status status = parse_property_line(line.text, p);
    if (status != line_status::ok)
      throw_bad_line(origin, line.number, line.text, status,
                     std::string(property_line_expected) + " or a '----' node separator");
    if (first_key.empty()) first_key = p.key;
    // Without separators, files are concatenated: each one starts with the same first key.
    if (!open || (!separated && p.key == first_key)) {
      blocks.push_back({line.number, {}});
      open = true;
    }
    add_property(blocks.back().props, p, origin, line.number);
  }

  if (blocks.empty())
    throw_error(errc::parse_error,
                origin + ": no KFD node properties found" +
                    (command ? " after the command at line " + std::to_string(lines[*command].number)
                             : std::string()) +
                    "; expected the output of cat /sys/class/kfd/kfd/topology/nodes/*/properties");

  std::vector<std::uint32_t> ids;
  if (target == "*") {
    ids = glob_order(blocks.size());
  } else {
    std::uint32_t id = 0;
    if (parse_unsigned(target, id) != line_status::ok || blocks.size() != 1)
      throw_error(errc::parse_error,
                  origin + ":" + std::to_string(lines[*command].number) + ": the command names " +
                      "the single node " + std::string(target) + " but " +
                      std::to_string(blocks.size()) + " node blocks follow");
    ids.push_back(id);
  }

  std::vector<kfd_node> nodes;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    require_node_keys(blocks[i].props, origin + ":" + std::to_string(blocks[i].first_line) +
                                           " (node block starting here)");
    kfd_node node;
    node.id = ids[i];
    node.properties = std::move(blocks[i].props);
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const kfd_node& a, const kfd_node& b) { return a.id < b.id; });
  return nodes;
}

}  // namespace umem::hsa
