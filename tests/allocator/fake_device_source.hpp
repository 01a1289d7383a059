// Test double of a discrete GPU's own memory (umem::alloc::device_memory_source): fake_upstream's
// aligned host memory with a capacity, reported by memory_info() as the driver would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "allocator/fake_upstream.hpp"
#include "umem/allocator/source/device_memory_source.hpp"

namespace umem::alloc::test {

class fake_device_source final : public device_memory_source {
 public:
  explicit fake_device_source(std::size_t capacity, std::size_t granularity = std::size_t{2} << 20)
      : memory_(capacity, granularity), capacity_(capacity) {}
  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override {
    return memory_.allocate(bytes, where, kind);
  }
  void deallocate(const segment& s) noexcept override {
    if (on_deallocate) on_deallocate();
    memory_.deallocate(s);
  }
  std::string describe() const override { return "fake device memory"; }
  std::pair<std::uint64_t, std::uint64_t> memory_info() const override {
    return {capacity_ - memory_.outstanding_bytes(), capacity_};
  }
  const fake_upstream& memory() const { return memory_; }
  // Called at the start of each deallocate() (a segment given back), e.g. to act during a trim.
  std::function<void()> on_deallocate;

 private:
  fake_upstream memory_;
  std::size_t capacity_;
};

}  // namespace umem::alloc::test
