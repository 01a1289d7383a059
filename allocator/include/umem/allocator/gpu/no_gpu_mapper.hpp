// The gpu_mapper for a node without a usable GPU runtime: the allocator still works as a NUMA
// host allocator and says so.
#pragma once

#include <string>
#include <utility>

#include "umem/allocator/gpu/gpu_mapper.hpp"

namespace umem::alloc {

class no_gpu_mapper final : public gpu_mapper {
 public:
  // `reason`: why there is no runtime, e.g. topology::hsa.state_reason.
  explicit no_gpu_mapper(std::string reason) : reason_(std::move(reason)) {}

  void map(const segment&) override {}
  void unmap(const segment&) noexcept override {}
  bool gpu_accessible() const override { return false; }
  bool pageable() const override { return true; }
  // "no GPU runtime (<reason>): host NUMA memory only"
  std::string describe() const override;

 private:
  std::string reason_;
};

}  // namespace umem::alloc
