// Copy vs zero-copy for umem memory on an NVIDIA GPU, 1 MiB to 4 GiB. Prints a
// markdown table (docs/log/2026-11-30-h200-gpu-tests-and-copies.md). Times are the best of `kReps`
// runs after one warm-up.
//   alloc:    umem allocate() of a fresh segment (mmap + mbind + cuMemHostRegister)
//   copy:     cudaMemcpy host->device from umem memory into a cudaMalloc buffer, what `.cuda()`
//             does (extra device memory: the whole buffer)
//   pageable: the same copy from plain malloc memory, for reference
//   alias:    cudaHostGetDevicePointer on umem memory, what an `as_device` alias costs (no extra
//             memory: the kernel reads the host pages over the bus)
//   zc read / dev read: a kernel reading every byte once from umem memory (across PCIe) / from
//             the device buffer (HBM)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "kernels.hpp"
#include "umem/allocator/allocator.hpp"

namespace {

constexpr int kReps = 3;

double wall_ms(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double best_ms(const std::function<void()>& f) {
  f();  // warm-up
  double best = 1e30;
  for (int i = 0; i < kReps; ++i) best = std::min(best, wall_ms(f));
  return best;
}

// Kernel time by CUDA events, best of kReps after a warm-up.
double kernel_ms(const void* p, std::size_t bytes, std::uint32_t* sink) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  launch_read_all(p, bytes, sink, nullptr);
  cudaDeviceSynchronize();
  float best = 1e30f;
  for (int i = 0; i < kReps; ++i) {
    cudaEventRecord(a);
    launch_read_all(p, bytes, sink, nullptr);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    best = std::min(best, ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

double gbps(std::size_t bytes, double ms) { return static_cast<double>(bytes) / ms / 1e6; }

std::size_t device_used() {
  std::size_t free_b = 0, total = 0;
  cudaMemGetInfo(&free_b, &total);
  return total - free_b;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device here\n");
    return 0;
  }
  cudaSetDevice(0);
  cudaFree(nullptr);
  umem::alloc::allocator a(umem::alloc::alloc_options{});
  std::printf("allocator: %s\n\n", a.describe().c_str());
  std::uint32_t* sink = nullptr;
  cudaMalloc(&sink, sizeof *sink);
  std::printf("| size | alloc ms | copy ms | copy GB/s | pageable copy ms | alias us | copy extra "
              "MiB | alias extra MiB | zc read ms | zc GB/s | dev read ms | dev GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t mib = 1; mib <= 4096; mib *= 4) {
    const std::size_t bytes = mib << 20;
    void* host = nullptr;
    const double alloc_ms = wall_ms([&] { host = a.allocate(bytes); });
    std::memset(host, 0x5a, bytes);

    const std::size_t before_alias = device_used();
    void* alias = nullptr;
    const double alias_ms = best_ms([&] { cudaHostGetDevicePointer(&alias, host, 0); });
    const std::size_t alias_extra = device_used() - before_alias;

    const std::size_t before_copy = device_used();
    void* dev = nullptr;
    if (cudaMalloc(&dev, bytes) != cudaSuccess) {
      std::printf("cudaMalloc(%zu MiB) failed\n", mib);
      return 1;
    }
    const std::size_t copy_extra = device_used() - before_copy;
    const double copy_ms = best_ms([&] {
      cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
    });

    void* pageable = std::malloc(bytes);
    std::memset(pageable, 0x5a, bytes);
    const double pageable_ms = best_ms([&] {
      cudaMemcpy(dev, pageable, bytes, cudaMemcpyHostToDevice);
    });
    std::free(pageable);

    const double zc_ms = kernel_ms(alias, bytes, sink);
    const double dev_ms = kernel_ms(dev, bytes, sink);
    std::printf("| %zu MiB | %.2f | %.3f | %.1f | %.3f | %.1f | %.0f | %.0f | %.3f | %.1f | %.3f | "
                "%.0f |\n",
                mib, alloc_ms, copy_ms, gbps(bytes, copy_ms), pageable_ms, alias_ms * 1000.0,
                static_cast<double>(copy_extra) / (1 << 20),
                static_cast<double>(alias_extra) / (1 << 20), zc_ms, gbps(bytes, zc_ms), dev_ms,
                gbps(bytes, dev_ms));
    std::fflush(stdout);
    cudaFree(dev);
    a.deallocate(host);
    a.trim();
  }
  const cudaError_t e = cudaGetLastError();
  std::printf("\nCUDA errors: %s\n", e == cudaSuccess ? "none" : cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
