// A 4-node model shaped like a 4-socket MI300A (distances 10/32, no GPU runtime) whose memory is
// one fake_upstream, recording each segment's binding: the allocator tests' machine.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "allocator/fake_upstream.hpp"
#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/core/topology.hpp"

namespace umem::alloc::test {

inline umem::topology four_nodes() {
  umem::topology t;
  for (int n = 0; n < 4; ++n) t.numa.nodes.push_back({n, {unsigned(n)}, 128ull << 30, {}, n});
  t.numa.distances = {{10, 32, 32, 32}, {32, 10, 32, 32}, {32, 32, 10, 32}, {32, 32, 32, 10}};
  return t;
}

// `capacity` bytes in all (0: unlimited), segments rounded to 2 MiB and aligned to a slab (64 KiB,
// fake_upstream's default), so that small requests are slab objects, as on the host source.
struct four_node_allocator {
  fake_upstream* upstream = nullptr;
  std::unique_ptr<allocator> a;
  explicit four_node_allocator(const std::string& conf, std::size_t capacity = 0) {
    auto up = std::make_unique<fake_upstream>(capacity, std::size_t{2} << 20);
    upstream = up.get();
    a = std::make_unique<allocator>(parse_alloc_conf(conf), four_nodes(), std::move(up),
                                    std::make_unique<no_gpu_mapper>("test: no GPU"));
  }
};

}  // namespace umem::alloc::test
