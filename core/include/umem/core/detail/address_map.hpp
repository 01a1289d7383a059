// A hash table from addresses to values, for the tables of live blocks that every allocation and
// free looks up under a lock (the caching pool's, the torch bridge's). Internal (detail/).
//
// Note [Address map]
// std::unordered_map allocates a node per entry and follows a bucket pointer and then a node
// pointer per lookup. Between PyTorch's kernel launches the caches are cold, and those misses
// were the largest part of a bridge call (bench/torch_bridge, --touch-between). Here the keys
// are one array, probed linearly from a multiplicative (Fibonacci) hash of the address, and the
// values another at the same index: a lookup reads a line of keys, mostly one, then the value's
// line, and no insert calls the heap until the table grows (at half full, so probe runs stay
// short). Address 0 marks an empty slot, so 0 is no key. An erase moves the later entries of its
// run back (backward-shift deletion) instead of leaving a tombstone, so runs stay as short after
// any number of erases as if the erased keys had never been inserted.
// Not thread-safe: its owners hold their lock. Pointers returned by find stay valid until the
// next insert or erase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "umem/core/error.hpp"

namespace umem::detail {

template <class V>
class address_map {
 public:
  // Room for `expected` entries before the first growth.
  explicit address_map(std::size_t expected = 0) { rehash(slots_for(expected)); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Slots; it doubles when an insert would fill more than half of them.
  std::size_t capacity() const noexcept { return mask_ + 1; }

  V* find(std::uintptr_t key) noexcept {
    const std::size_t i = slot_of(key);
    return keys_[i] == key && key != 0 ? &values_[i] : nullptr;
  }
  const V* find(std::uintptr_t key) const noexcept {
    return const_cast<address_map*>(this)->find(key);
  }
  bool contains(std::uintptr_t key) const noexcept { return find(key) != nullptr; }

  // key -> value (replacing a value key had); key 0 throws umem::error(invalid_argument).
  // Strong guarantee: when growing throws (std::bad_alloc) the table is unchanged.
  void insert(std::uintptr_t key, V value) {
    if (key == 0) throw_error(errc::invalid_argument, "address_map: address 0 is no key");
    std::size_t i = slot_of(key);
    if (keys_[i] == key) {
      values_[i] = std::move(value);
      return;
    }
    if ((size_ + 1) * 2 > capacity()) {
      rehash(capacity() * 2);
      i = slot_of(key);
    }
    keys_[i] = key;
    values_[i] = std::move(value);
    ++size_;
  }

  // Removes key; its value, or nullopt when key was not there.
  std::optional<V> take(std::uintptr_t key) {
    std::size_t i = slot_of(key);
    if (key == 0 || keys_[i] != key) return std::nullopt;
    std::optional<V> out(std::move(values_[i]));
    // Backward shift: an entry further along the run moves into the hole when the hole lies
    // between its home slot and where it is, so every entry stays reachable from its home.
    for (std::size_t j = (i + 1) & mask_; keys_[j] != 0; j = (j + 1) & mask_) {
      const std::size_t home = home_of(keys_[j]);
      if (((j - home) & mask_) < ((j - i) & mask_)) continue;
      keys_[i] = keys_[j];
      values_[i] = std::move(values_[j]);
      i = j;
    }
    keys_[i] = 0;
    values_[i] = V{};  // lets go of what the value held (the bridge's stream lists)
    --size_;
    return out;
  }
  bool erase(std::uintptr_t key) { return take(key).has_value(); }

  // f(key, value) for every entry, in no particular order; f must not insert or erase.
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i <= mask_; ++i)
      if (keys_[i] != 0) f(keys_[i], static_cast<const V&>(values_[i]));
  }

 private:
  static std::size_t slots_for(std::size_t expected) {
    std::size_t n = 16;
    while (n < expected * 2) n *= 2;
    return n;
  }
  std::size_t home_of(std::uintptr_t key) const noexcept {
    // Fibonacci hashing: the product's top bits depend on every bit of the address, including
    // the high ones that distinguish aligned blocks.
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }
  // key's slot, or the empty slot that ends its run.
  std::size_t slot_of(std::uintptr_t key) const noexcept {
    std::size_t i = home_of(key);
    while (keys_[i] != key && keys_[i] != 0) i = (i + 1) & mask_;
    return i;
  }
  void rehash(std::size_t slots) {
    // Growing moves every value; a move that threw would leave some in neither table. (Asserted
    // here, not at class scope: a value type nested in its owner is complete only in its bodies.)
    static_assert(std::is_nothrow_move_assignable_v<V> &&
                  std::is_nothrow_default_constructible_v<V>);
    auto keys = std::make_unique<std::uintptr_t[]>(slots);  // zeroed: all empty
    auto values = std::make_unique<V[]>(slots);
    address_map next{empty_tag{}};
    next.keys_ = std::move(keys);
    next.values_ = std::move(values);
    next.mask_ = slots - 1;
    next.shift_ = 64;
    for (std::size_t s = slots; s > 1; s /= 2) --next.shift_;
    for (std::size_t i = 0; keys_ && i <= mask_; ++i)
      if (keys_[i] != 0) {
        const std::size_t j = next.slot_of(keys_[i]);
        next.keys_[j] = keys_[i];
        next.values_[j] = std::move(values_[i]);
      }
    next.size_ = size_;
    *this = std::move(next);
  }
  struct empty_tag {};
  address_map(empty_tag) noexcept {}
  address_map(address_map&&) noexcept = default;
  address_map& operator=(address_map&&) noexcept = default;

  std::unique_ptr<std::uintptr_t[]> keys_;
  std::unique_ptr<V[]> values_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace umem::detail
