// What the torch bridge tests share: a one-node machine whose memory is a fake_upstream, and
// stream events that complete only on their third query, so that blocks waiting for streams
// really wait.
#pragma once

#include <cstddef>
#include <memory>

#include "allocator/fake_upstream.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/machine/stream_event.hpp"
#include "umem/core/topology.hpp"
#include "umem/torch_bridge/bridge.hpp"

namespace umem::torch_bridge::test {

inline topology one_node() {
  topology t;
  t.numa.nodes.push_back({0, {0u}, 64ull << 30, {}, 0});
  t.numa.distances = {{10}};
  return t;
}

// An event that completes on its third query after a record: blocks that wait for one really
// wait, and are released by a later malloc's or empty_cache's query.
class counting_event final : public machine::stream_event {
 public:
  void record(void*) override { queries_ = 0; }
  bool query() override { return ++queries_ >= 3; }
  void synchronize() override { queries_ = 3; }

 private:
  int queries_ = 3;  // nothing recorded: complete
};

// `capacity` bytes of memory in all (0: unlimited), segments rounded to 2 MiB; counting_events
// unless `events` says otherwise.
struct fixture {
  alloc::test::fake_upstream* upstream = nullptr;
  std::unique_ptr<bridge> b;
  explicit fixture(std::size_t capacity = 0,
                   event_factory events = [](int) { return std::make_unique<counting_event>(); }) {
    auto up = std::make_unique<alloc::test::fake_upstream>(capacity, std::size_t{2} << 20, 4096);
    upstream = up.get();
    auto a = std::make_unique<alloc::allocator>(
        alloc::alloc_options{}, one_node(), std::move(up),
        std::make_unique<alloc::no_gpu_mapper>("test: no GPU"));
    b = std::make_unique<bridge>(std::move(a), std::move(events), true, "");
  }
};

}  // namespace umem::torch_bridge::test
