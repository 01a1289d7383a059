// libFuzzer target: parse_alloc_conf (the UMEM_ALLOC_CONF parser, alloc_config.hpp) returns or
// throws umem::error; anything else is a finding, as is an accepted text whose options do not
// read back from describe() (the header promises parse_alloc_conf(describe(o)) == o) or whose
// limits resolve to more bytes than the memory they are a fraction of.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "umem/allocator/alloc_config.hpp"
#include "umem/core/error.hpp"

namespace {

[[noreturn]] void finding(const char* what) {
  std::fputs(what, stderr);
  std::abort();
}

// Two nodes of uneven size, as the VM suite's guest has: node fractions and limit.total resolve
// against real numbers, and limit.node<N> for other N is the error it must be.
const umem::numa_topology& two_nodes() {
  static const umem::numa_topology numa = [] {
    umem::numa_topology n;
    n.nodes.resize(2);
    n.nodes[0].os_index = 0;
    n.nodes[0].memory_total_bytes = std::uint64_t{128} << 30;
    n.nodes[1].os_index = 1;
    n.nodes[1].memory_total_bytes = (std::uint64_t{96} << 30) + 4096;
    return n;
  }();
  return numa;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  umem::alloc::alloc_options o;
  try {
    o = umem::alloc::parse_alloc_conf(text);
  } catch (const umem::error&) {
    return 0;
  }
  try {
    if (umem::alloc::parse_alloc_conf(umem::alloc::describe(o)) != o)
      finding("describe() did not read back to the same options\n");
  } catch (const umem::error&) {
    finding("describe() wrote a text the parser refuses\n");
  }
  try {
    const auto limits = umem::alloc::resolve_limits(o, two_nodes());
    for (const auto& [node, bytes] : limits.node_bytes) {
      const auto& l = o.limit_node.at(node);
      const auto memory = two_nodes().nodes[static_cast<std::size_t>(node)].memory_total_bytes;
      if (l.fraction && bytes > memory)
        finding("a node fraction resolved to more than the node's memory\n");
    }
  } catch (const umem::error&) {
  }
  return 0;
}
