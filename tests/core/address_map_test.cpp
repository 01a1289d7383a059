#include "umem/core/detail/address_map.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "umem/core/error.hpp"

namespace {

using umem::detail::address_map;

// Every key of `model` is found with its value, and `absent` keys are not.
void expect_same(const address_map<int>& m, const std::map<std::uintptr_t, int>& model,
                 const std::vector<std::uintptr_t>& absent) {
  ASSERT_EQ(m.size(), model.size());
  for (const auto& [k, v] : model) {
    const int* got = m.find(k);
    ASSERT_NE(got, nullptr) << "key " << k << " lost";
    EXPECT_EQ(*got, v);
  }
  for (std::uintptr_t k : absent) {
    if (!model.count(k)) {
      EXPECT_FALSE(m.contains(k)) << "key " << k << " found after its erase";
    }
  }
}

TEST(AddressMap, FindsWhatWasInsertedAndNothingElse) {
  address_map<int> m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(0x1000), nullptr);
  m.insert(0x1000, 1);
  m.insert(0x2000, 2);
  ASSERT_NE(m.find(0x1000), nullptr);
  EXPECT_EQ(*m.find(0x1000), 1);
  EXPECT_EQ(*m.find(0x2000), 2);
  EXPECT_EQ(m.find(0x3000), nullptr);
  EXPECT_EQ(m.size(), 2u);
  m.insert(0x1000, 7);  // replaces
  EXPECT_EQ(*m.find(0x1000), 7);
  EXPECT_EQ(m.size(), 2u);
}

TEST(AddressMap, TakeGivesTheValueBackOnce) {
  address_map<int> m;
  m.insert(0x4000, 4);
  const auto v = m.take(0x4000);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, 4);
  EXPECT_FALSE(m.take(0x4000).has_value());
  EXPECT_FALSE(m.erase(0x4000));
  EXPECT_TRUE(m.empty());
}

TEST(AddressMap, AddressZeroIsNoKey) {
  address_map<int> m;
  try {
    m.insert(0, 1);
    FAIL() << "inserting address 0 did not throw";
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), umem::errc::invalid_argument);
  }
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(0), nullptr);
  EXPECT_FALSE(m.take(0).has_value());
}

TEST(AddressMap, ReservesForTheExpectedEntriesAndGrowsPastHalfFull) {
  address_map<int> m(100);
  const std::size_t slots = m.capacity();
  EXPECT_GE(slots, 200u);
  for (int i = 1; i <= 100; ++i) m.insert(static_cast<std::uintptr_t>(i) * 512, i);
  EXPECT_EQ(m.capacity(), slots) << "grew before the expected entries were in";
  std::size_t n = 100;
  while (m.capacity() == slots) {
    ++n;
    m.insert(n * 512, static_cast<int>(n));
  }
  EXPECT_EQ(m.capacity(), slots * 2);
  EXPECT_EQ(n, slots / 2 + 1) << "grew at the wrong fill";
  for (std::size_t i = 1; i <= n; ++i) {
    ASSERT_NE(m.find(i * 512), nullptr) << "entry " << i << " lost in the growth";
    EXPECT_EQ(*m.find(i * 512), static_cast<int>(i));
  }
}

// A small table holding aligned, clustered addresses (as allocators hand out) collides all the
// time, so this walks insertions and backward-shift erases through long runs and wrap-arounds.
TEST(AddressMap, MatchesAnOrderedMapThroughRandomInsertsAndErases) {
  std::mt19937_64 rng(12345);
  for (const std::uintptr_t stride : {std::uintptr_t{512}, std::uintptr_t{1} << 21}) {
    address_map<int> m;
    std::map<std::uintptr_t, int> model;
    std::vector<std::uintptr_t> keys;
    for (std::uintptr_t i = 1; i <= 40; ++i) keys.push_back(0x7f0000000000 + i * stride);
    for (int step = 0; step < 20000; ++step) {
      const std::uintptr_t k = keys[rng() % keys.size()];
      if (rng() % 2 == 0) {
        const int v = static_cast<int>(rng() % 1000);
        m.insert(k, v);
        model[k] = v;
      } else {
        const auto got = m.take(k);
        const auto it = model.find(k);
        ASSERT_EQ(got.has_value(), it != model.end()) << "step " << step;
        if (got) {
          EXPECT_EQ(*got, it->second);
          model.erase(it);
        }
      }
      if (step % 97 == 0) expect_same(m, model, keys);
    }
    expect_same(m, model, keys);
  }
}

TEST(AddressMap, ForEachVisitsEveryEntryOnce) {
  address_map<int> m;
  std::map<std::uintptr_t, int> model;
  for (int i = 1; i <= 50; ++i) {
    m.insert(static_cast<std::uintptr_t>(i) * 4096, i);
    model[static_cast<std::uintptr_t>(i) * 4096] = i;
  }
  for (int i = 1; i <= 50; i += 3) {
    m.erase(static_cast<std::uintptr_t>(i) * 4096);
    model.erase(static_cast<std::uintptr_t>(i) * 4096);
  }
  std::map<std::uintptr_t, int> seen;
  m.for_each([&](std::uintptr_t k, const int& v) { EXPECT_TRUE(seen.emplace(k, v).second); });
  EXPECT_EQ(seen, model);
}

TEST(AddressMap, AnErasedValueIsDestroyedAtOnce) {
  auto held = std::make_shared<int>(1);
  address_map<std::shared_ptr<int>> m;
  m.insert(0x10000, held);
  m.insert(0x20000, held);
  EXPECT_EQ(held.use_count(), 3);
  m.erase(0x10000);
  EXPECT_EQ(held.use_count(), 2) << "the table kept a copy of an erased value";
  EXPECT_EQ(*m.find(0x20000), held);
}

}  // namespace
