// What the caching_pool tests share: sizes, the node-0 binding, stats shorthands, and a runner
// for code that must throw umem::error.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "umem/allocator/placement.hpp"
#include "umem/allocator/pool_stats.hpp"
#include "umem/core/error.hpp"

namespace umem::alloc::test {

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * KiB;

inline const node_binding node0{bind_mode::bind, {0}};

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

inline std::int64_t cur(const pool_stats& s, metric m, size_class c = size_class::all) {
  return s(m, c).current;
}

// Runs f, expects umem::error with `code`, returns its message.
template <class F>
std::string error_of(F&& f, errc code) {
  try {
    f();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a umem::error";
  return {};
}

}  // namespace umem::alloc::test
