#include "integrity_checker.hpp"

#include <algorithm>
#include <sstream>

#include "umem/core/error.hpp"

namespace umem::trace_replay {

namespace {

constexpr std::size_t edge_bytes = 64;
constexpr std::size_t max_messages = 8;

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

integrity_checker::integrity_checker(std::size_t ids, std::size_t stride)
    : stride_(stride), address_(ids, 0), size_(ids, 0) {
  if (stride < 8 || (stride & (stride - 1)) != 0)
    throw error(errc::invalid_argument, "integrity_checker: stride " + std::to_string(stride) +
                                            " is not a power of two >= 8");
}

unsigned char integrity_checker::expected(std::int64_t id, std::uintptr_t address) const {
  const std::uint64_t w =
      mix(static_cast<std::uint64_t>(id) ^ (static_cast<std::uint64_t>(pass_) << 48));
  return static_cast<unsigned char>((w >> (8 * (address & 7))) ^ (address >> 3));
}

template <class Visit>
void integrity_checker::for_each_sampled_byte(std::uintptr_t begin, std::size_t size,
                                              Visit&& visit) const {
  const std::uintptr_t end = begin + size;
  const std::uintptr_t head_end = begin + std::min(size, edge_bytes);
  const std::uintptr_t tail_begin = std::max(head_end, end - std::min(size, edge_bytes));
  for (std::uintptr_t a = begin; a < head_end; ++a) visit(a);
  // Stride words strictly between head and tail.
  for (std::uintptr_t w = (head_end + stride_ - 1) & ~(stride_ - 1); w + 8 <= tail_begin;
       w += stride_)
    for (std::uintptr_t a = w; a < w + 8; ++a) visit(a);
  for (std::uintptr_t a = tail_begin; a < end; ++a) visit(a);
}

void integrity_checker::fail(const std::string& message) {
  ++failures_;
  if (messages_.size() < max_messages) messages_.push_back(message);
}

void integrity_checker::on_alloc(std::int64_t id, void* p, std::size_t size,
                                 std::uint32_t line) {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const auto index = static_cast<std::size_t>(id);
  auto next = live_.upper_bound(begin);
  auto overlaps = [&](std::uintptr_t s, const live_block& b) {
    return s < begin + size && begin < b.end;
  };
  const live_block* hit = nullptr;
  if (next != live_.end() && overlaps(next->first, next->second)) hit = &next->second;
  if (next != live_.begin()) {
    const auto prev = std::prev(next);
    if (overlaps(prev->first, prev->second)) hit = &prev->second;
  }
  if (hit) {
    std::ostringstream s;
    s << "line " << line << ": block " << id << " at " << p << " (" << size
      << " B) overlaps live block " << hit->id;
    fail(s.str());
  }
  address_[index] = begin;
  size_[index] = size;
  live_[begin] = live_block{begin + size, id};  // a failed overlap replaces; counted above
  for_each_sampled_byte(begin, size, [&](std::uintptr_t a) {
    *reinterpret_cast<unsigned char*>(a) = expected(id, a);
  });
}

void* integrity_checker::on_free(std::int64_t id, std::uint32_t line) {
  const auto index = static_cast<std::size_t>(id);
  const std::uintptr_t begin = address_[index];
  const std::size_t size = size_[index];
  std::size_t bad = 0;
  std::uintptr_t first_bad = 0;
  for_each_sampled_byte(begin, size, [&](std::uintptr_t a) {
    if (*reinterpret_cast<const unsigned char*>(a) != expected(id, a) && bad++ == 0)
      first_bad = a;
  });
  ++checked_;
  if (bad != 0) {
    std::ostringstream s;
    s << "line " << line << ": block " << id << " at " << reinterpret_cast<void*>(begin) << " ("
      << size << " B): " << bad << " pattern bytes changed, the first at offset "
      << (first_bad - begin);
    fail(s.str());
  }
  const auto it = live_.find(begin);
  if (it != live_.end() && it->second.id == id) live_.erase(it);
  address_[index] = 0;
  return reinterpret_cast<void*>(begin);
}

}  // namespace umem::trace_replay
