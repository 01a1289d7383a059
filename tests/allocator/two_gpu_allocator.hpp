// A test machine of two NUMA nodes with GPU 0 on node 0 and GPU 1 on node 1, and an allocator over
// it with fake sources: host memory from a fake_upstream, GPU 0 discrete (a fake_device_source of
// `capacity`), GPU 1 unified (the device-source factory answers null for it). Shared by the
// allocator's device-pool tests and the torch bridge's tests of discrete and unified GPUs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <string>

#include "allocator/fake_device_source.hpp"
#include "allocator/fake_upstream.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"

namespace umem::alloc::test {

struct two_gpu_allocator {
  fake_upstream* host = nullptr;
  fake_device_source* device0 = nullptr;  // GPU 0's, once its first allocation made it
  std::map<int, int> factory_calls;       // per GPU: calls of the device-source factory
  std::unique_ptr<allocator> a;

  explicit two_gpu_allocator(const std::string& conf,
                             std::size_t capacity = std::size_t{64} << 20) {
    topology t;
    for (int n = 0; n < 2; ++n) t.numa.nodes.push_back({n, {unsigned(n)}, 128ull << 30, {}, n});
    t.numa.distances = {{10, 32}, {32, 10}};
    for (std::uint32_t g = 0; g < 2; ++g) {
      agent gpu;
      gpu.kind = agent_kind::gpu;
      gpu.kfd_node = 2 + g;
      t.agents.push_back(gpu);
      t.gpu_numa.push_back({2 + g, static_cast<int>(g), "test", "GPU g is on node g"});
    }
    auto up = std::make_unique<fake_upstream>(0, std::size_t{2} << 20, 4096);
    host = up.get();
    a = std::make_unique<allocator>(
        parse_alloc_conf(conf), t, std::move(up), std::make_unique<no_gpu_mapper>("test: no GPU"),
        [this, capacity](int device) -> std::unique_ptr<device_memory_source> {
          ++factory_calls[device];
          if (device != 0) return nullptr;
          auto d = std::make_unique<fake_device_source>(capacity);
          device0 = d.get();
          return d;
        });
  }
  int sources_asked() const {
    return std::accumulate(factory_calls.begin(), factory_calls.end(), 0,
                           [](int n, const auto& kv) { return n + kv.second; });
  }
};

}  // namespace umem::alloc::test
