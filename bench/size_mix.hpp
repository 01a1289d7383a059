// The request sizes the benchmarks use: single sizes from 256 B to 256 MiB, and tensor-like
// mixes (a fixed pseudo-random sequence, log-uniform between two bounds, so every order of
// magnitude is as frequent as the next: many small tensors, few huge ones by bytes).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

namespace umem::bench {

inline constexpr std::size_t KiB = std::size_t{1} << 10;
inline constexpr std::size_t MiB = std::size_t{1} << 20;

// The boundary between the small and the large size class (Note [Size classes] in
// report.cpp): targets differ on either side of it.
inline constexpr std::size_t large_threshold = 64 * KiB;

// Sizes measured one at a time: three small, seven large.
std::span<const std::size_t> single_sizes();

struct size_mix {
  std::string_view name;  // "small", "large", "all"
  std::size_t min_bytes;  // inclusive
  std::size_t max_bytes;  // inclusive
};

// small: 256 B .. 64 KiB - 1, large: 64 KiB .. 256 MiB, all: 256 B .. 256 MiB.
std::span<const size_mix> mixes();

// `count` sizes of `mix`, the same on every run and every machine (fixed seed, own transform).
std::vector<std::size_t> mix_sequence(const size_mix& mix, std::size_t count);

}  // namespace umem::bench
