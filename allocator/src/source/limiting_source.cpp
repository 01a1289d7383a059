#include "umem/allocator/source/limiting_source.hpp"

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

std::map<int, std::int64_t> limiting_source::change_of(std::size_t before, std::size_t after,
                                                       const node_binding& where) const {
  std::map<int, std::int64_t> d;
  for (const auto& [node, share] : charge(after, where)) d[node] += static_cast<std::int64_t>(share);
  for (const auto& [node, share] : charge(before, where)) d[node] -= static_cast<std::int64_t>(share);
  return d;
}

void limiting_source::apply(std::size_t before, std::size_t after,
                            const node_binding& where) noexcept {
  if (before == after) return;
  std::lock_guard lock(mutex_);
  // Unsigned wrap-around adds a negative change correctly.
  total_ += static_cast<std::uint64_t>(after) - static_cast<std::uint64_t>(before);
  for (const auto& [node, d] : change_of(before, after, where))
    per_node_[node] += static_cast<std::uint64_t>(d);
}

void limiting_source::take(std::size_t before, std::size_t after, const node_binding& where) {
  const std::uint64_t bytes = after - before;
  const auto shares = change_of(before, after, where);
  std::lock_guard lock(mutex_);
  if (limits_.total && total_ + bytes > *limits_.total)
    throw_error(errc::out_of_memory,
                "limit.total reached: " + gib(total_) + " reserved + " + gib(bytes) +
                    " requested > limit " + gib(*limits_.total));
  for (const auto& [node, d] : shares) {
    auto it = limits_.per_node.find(node);
    if (d > 0 && it != limits_.per_node.end() &&
        per_node_[node] + static_cast<std::uint64_t>(d) > it->second)
      throw_error(errc::out_of_memory, "limit.node" + std::to_string(node) + " reached: " +
                                           gib(per_node_[node]) + " reserved + " +
                                           gib(static_cast<std::uint64_t>(d)) +
                                           " requested > limit " + gib(it->second));
  }
  // Charge before calling upstream so concurrent requests cannot overshoot together.
  total_ += bytes;
  for (const auto& [node, d] : shares) per_node_[node] += static_cast<std::uint64_t>(d);
}

segment limiting_source::allocate(std::size_t bytes, const node_binding& where, coherence kind) {
  return allocate_growable(bytes, 0, where, kind);
}

segment limiting_source::allocate_growable(std::size_t bytes, std::size_t reserve_bytes,
                                           const node_binding& where, coherence kind) {
  take(0, bytes, where);
  try {
    segment s = reserve_bytes == 0 ? upstream_.allocate(bytes, where, kind)
                                   : upstream_.allocate_growable(bytes, reserve_bytes, where, kind);
    apply(bytes, s.size, where);  // the source rounded up: charge what it really took
    return s;
  } catch (...) {
    apply(bytes, 0, where);
    throw;
  }
}

// Decommitted pages stay charged (Note [Decommitted pages]).
bool limiting_source::decommit(const segment& s, void* p, std::size_t bytes) {
  return upstream_.decommit(s, p, bytes);
}

void limiting_source::recommit(const segment& s, void* p, std::size_t bytes) {
  upstream_.recommit(s, p, bytes);
}

bool limiting_source::grow(segment& s, std::size_t extra_bytes) {
  // Charged as the change from a segment of the old size to one of the new size, so the charge
  // always equals what a new segment of the current size would have been charged.
  const std::size_t before = s.size;
  take(before, before + extra_bytes, s.binding);
  bool grown = false;
  try {
    grown = upstream_.grow(s, extra_bytes);
  } catch (...) {
    apply(before + extra_bytes, before, s.binding);
    throw;
  }
  apply(before + extra_bytes, grown ? s.size : before, s.binding);
  return grown;
}

void limiting_source::deallocate(const segment& s) noexcept {
  upstream_.deallocate(s);
  apply(s.size, 0, s.binding);
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
