// Adaptor: memory from an upstream source, made GPU-accessible by a gpu_mapper before it is
// handed out and released from the GPU before it goes back.
#pragma once

#include "umem/allocator/gpu_mapper.hpp"
#include "umem/allocator/segment.hpp"

namespace umem::alloc {

class gpu_visible_source final : public upstream_source {
 public:
  // Both referents must outlive the adaptor.
  gpu_visible_source(upstream_source& upstream, gpu_mapper& mapper)
      : upstream_(upstream), mapper_(mapper) {}

  segment allocate(std::size_t bytes, const node_binding& where, coherence kind) override;
  void deallocate(const segment& s) noexcept override;
  std::string describe() const override;

 private:
  upstream_source& upstream_;
  gpu_mapper& mapper_;
};

}  // namespace umem::alloc
