#include "size_mix.hpp"

#include <array>
#include <cmath>
#include <cstdint>

namespace umem::bench {

std::span<const std::size_t> single_sizes() {
  static constexpr std::array sizes{256 * std::size_t{1}, 4 * KiB, 32 * KiB, 64 * KiB, 256 * KiB,
                                    1 * MiB,  4 * MiB,    16 * MiB, 64 * MiB, 256 * MiB};
  return sizes;
}

std::span<const size_mix> mixes() {
  static constexpr std::array m{size_mix{"small", 256, large_threshold - 1},
                                size_mix{"large", large_threshold, 256 * MiB},
                                size_mix{"all", 256, 256 * MiB}};
  return m;
}

std::vector<std::size_t> mix_sequence(const size_mix& mix, std::size_t count) {
  // splitmix64: a fixed, portable generator (std::uniform_real_distribution is not specified
  // bit for bit across standard libraries).
  std::uint64_t state = 0x756d656d62656e63ULL;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  const double lo = std::log(static_cast<double>(mix.min_bytes));
  const double hi = std::log(static_cast<double>(mix.max_bytes));
  std::vector<std::size_t> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double u = static_cast<double>(next() >> 11) / static_cast<double>(std::uint64_t{1} << 53);
    auto bytes = static_cast<std::size_t>(std::exp(lo + u * (hi - lo)));
    if (bytes < mix.min_bytes) bytes = mix.min_bytes;
    if (bytes > mix.max_bytes) bytes = mix.max_bytes;
    out.push_back(bytes);
  }
  return out;
}

}  // namespace umem::bench
