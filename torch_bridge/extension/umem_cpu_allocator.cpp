// umem as PyTorch's CPU allocator: every CPU tensor (torch.randn on the CPU, a DataLoader batch, an
// optimizer state, torch.load's result) is umem memory, placed by umem's policy and GPU-visible
// per segment where a GPU runtime is present. Built against the installed PyTorch by
// python/umem/_extension.py (CPU-only builds too: it includes c10 and pybind11 only) and
// installed by umem.torch.enable_host(); libumem_torch.so does the memory work through
// umem_torch_host_malloc/free, whose addresses the Python package hands over.
//
// Note [CPU allocator]
// c10 keeps one allocator per device type with a priority: c10::SetCPUAllocator(a, p) replaces
// the current one only when p is at least the current priority (c10/core/Allocator.cpp,
// SetAllocator), and PyTorch registers its DefaultCPUAllocator at priority 0
// (c10/core/CPUAllocator.cpp, REGISTER_ALLOCATOR(kCPU, &g_cpu_alloc)). at::empty_cpu takes
// c10::GetCPUAllocator() for every unpinned CPU tensor (aten/src/ATen/EmptyTensor.cpp,
// GetCPUAllocatorMaybePinned), so the swap reaches tensors made afterwards; each storage keeps
// the deleter of the allocator that made it, so tensors made before the swap are freed by
// PyTorch's own allocator. DefaultCPUAllocator aligns to 64 bytes (c10::gAlignment); umem's
// blocks are 256-byte aligned (allocator.hpp). A zero-byte request gets a null pointer, as
// PyTorch's does. Allocations, frees and failures are reported to c10's
// profiledCPUMemoryReporter as DefaultCPUAllocator reports them, so torch.profiler's
// profile_memory sees CPU tensors (it costs nothing while no profiler asks).
// oneDNN's buffers go through raw_allocate/raw_deallocate of whatever c10's CPU allocator is at
// the time (aten/src/ATen/native/mkldnn/IDeepRegistration.cpp), so a buffer made before the swap
// can come back to umem's raw_deleter: memory umem does not own goes to the default allocator's.
//
// Releases: c10::Allocator::allocate is `const` up to 2.2 and not from 2.3 on, and copy_data is
// pure virtual from 2.3 on (c10/core/Allocator.h). As in torch_compat.hpp (Note [PyTorch
// releases]), both forms of allocate are declared without `override`: the one the base declares
// overrides it, the other is a plain member; copy_data is a plain member before 2.3.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "library_functions.hpp"
#include "umem/umem_torch.h"

namespace {

using umem_extension::fn;

// Above DefaultCPUAllocator's 0; equal to another library's priority 1 still wins (SetAllocator
// replaces at >=), so the last to ask is in force, and in_force() says whether umem is.
constexpr std::uint8_t cpu_allocator_priority = 1;

void release(void* p) {
  c10::profiledCPUMemoryReporter().Delete(p);
  fn.umem_torch_host_free(p);
}

// raw_deallocate's deleter: the pointer may predate the swap (Note [CPU allocator]).
void release_raw(void* p) {
  if (p == nullptr || fn.umem_torch_owns(p)) return release(p);
  c10::GetDefaultCPUAllocator()->raw_deleter()(p);
}

c10::DataPtr allocate_host(std::size_t n) {
  const c10::Device cpu(c10::DeviceType::CPU);
  if (n == 0) return {nullptr, nullptr, &release, cpu};
  void* p = nullptr;
  const umem_status s = fn.umem_torch_host_malloc(n, -1, &p);
  if (s == UMEM_ERR_OUT_OF_MEMORY) {
    c10::profiledCPUMemoryReporter().OutOfMemory(n);
    C10_THROW_ERROR(OutOfMemoryError, std::string("umem CPU allocator: ") +
                                          fn.umem_torch_last_error());
  }
  TORCH_CHECK(s == UMEM_OK, "umem CPU allocator: ", fn.umem_torch_last_error());
  c10::profiledCPUMemoryReporter().New(p, n);
  return {p, p, &release, cpu};
}

class umem_cpu_allocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) const { return allocate_host(n); }  // up to 2.2
  c10::DataPtr allocate(std::size_t n) { return allocate_host(n); }        // 2.3 on
  c10::DeleterFnPtr raw_deleter() const override { return &release_raw; }
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count != 0) std::memcpy(dest, src, count);
  }
};

umem_cpu_allocator the_allocator;
bool installed_ = false;

// Takes libumem_torch.so's functions {name: address}; raises naming any function missing.
void install(const pybind11::dict& functions) {
  TORCH_CHECK(!installed_, "umem: the CPU allocator extension is installed already");
  umem_extension::take_library_functions(functions, "CPU allocator extension");
  installed_ = true;
}

// Whether c10's CPU allocator, the one at::empty_cpu takes, is umem's.
bool in_force() { return c10::GetCPUAllocator() == &the_allocator; }

// Makes umem c10's CPU allocator (Note [CPU allocator]); returns in_force().
bool set_cpu_allocator() {
  TORCH_CHECK(installed_, "umem: install() the library's functions first");
  c10::SetCPUAllocator(&the_allocator, cpu_allocator_priority);
  return in_force();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "umem's CPU allocator for PyTorch (docs/cpu-tensors.md)";
  m.def("install", &install, "take libumem_torch.so's functions {name: address}");
  m.def("set_cpu_allocator", &set_cpu_allocator, "umem as c10's CPU allocator; whether it took");
  m.def("in_force", &in_force, "whether the allocator PyTorch's CPU tensors get is umem's");
}
