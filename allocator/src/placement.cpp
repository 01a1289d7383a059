#include "umem/allocator/placement.hpp"

#include "umem/core/detail/text.hpp"

namespace umem::alloc {

const char* to_string(bind_mode m) {
  switch (m) {
    case bind_mode::bind: return "bind";
    case bind_mode::preferred: return "preferred";
    case bind_mode::interleave: return "interleave";
  }
  return "?";
}

const char* to_string(populate_mode m) {
  switch (m) {
    case populate_mode::none: return "none";
    case populate_mode::touch: return "touch";
    case populate_mode::map_populate: return "map_populate";
  }
  return "?";
}

std::string format_node_set(const std::vector<int>& nodes) {
  return umem::detail::format_id_ranges(nodes);
}

}  // namespace umem::alloc
