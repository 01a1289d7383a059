#include "umem/allocator/limiting_source.hpp"

#include "umem/core/error.hpp"

namespace umem::alloc {
namespace {

std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(1ull << 30));
  return buf;
}

}  // namespace

std::map<int, std::uint64_t> limiting_source::charge(std::size_t bytes,
                                                     const node_binding& where) const {
  std::map<int, std::uint64_t> c;
  if (where.nodes.empty()) return c;
  const std::uint64_t share = bytes / where.nodes.size();
  for (int n : where.nodes) c[n] = share;
  c[where.nodes.front()] += bytes - share * where.nodes.size();
  return c;
}

segment limiting_source::allocate(std::size_t bytes, const node_binding& where, coherence kind) {
  {
    std::lock_guard lock(mutex_);
    if (limits_.total && total_ + bytes > *limits_.total)
      throw_error(errc::out_of_memory,
                  "limit.total reached: " + gib(total_) + " reserved + " + gib(bytes) +
                      " requested > limit " + gib(*limits_.total));
    for (const auto& [node, share] : charge(bytes, where)) {
      auto it = limits_.per_node.find(node);
      if (it != limits_.per_node.end() && per_node_[node] + share > it->second)
        throw_error(errc::out_of_memory,
                    "limit.node" + std::to_string(node) + " reached: " + gib(per_node_[node]) +
                        " reserved + " + gib(share) + " requested > limit " + gib(it->second));
    }
    // Reserve before calling upstream so concurrent requests cannot overshoot together.
    total_ += bytes;
    for (const auto& [node, share] : charge(bytes, where)) per_node_[node] += share;
  }
  try {
    segment s = upstream_.allocate(bytes, where, kind);
    if (s.size != bytes) {  // the source rounded up: charge what it really took
      std::lock_guard lock(mutex_);
      total_ = total_ - bytes + s.size;
      for (const auto& [node, share] : charge(bytes, where)) per_node_[node] -= share;
      for (const auto& [node, share] : charge(s.size, where)) per_node_[node] += share;
    }
    return s;
  } catch (...) {
    std::lock_guard lock(mutex_);
    total_ -= bytes;
    for (const auto& [node, share] : charge(bytes, where)) per_node_[node] -= share;
    throw;
  }
}

void limiting_source::deallocate(const segment& s) noexcept {
  upstream_.deallocate(s);
  std::lock_guard lock(mutex_);
  total_ -= s.size;
  for (const auto& [node, share] : charge(s.size, s.binding)) per_node_[node] -= share;
}

std::string limiting_source::describe() const {
  std::string d = upstream_.describe();
  if (limits_.total) d += "; limit.total " + gib(*limits_.total);
  for (const auto& [node, bytes] : limits_.per_node)
    d += "; limit.node" + std::to_string(node) + " " + gib(bytes);
  return d;
}

std::uint64_t limiting_source::reserved_total() const {
  std::lock_guard lock(mutex_);
  return total_;
}

std::uint64_t limiting_source::reserved_on(int node) const {
  std::lock_guard lock(mutex_);
  auto it = per_node_.find(node);
  return it == per_node_.end() ? 0 : it->second;
}

}  // namespace umem::alloc
