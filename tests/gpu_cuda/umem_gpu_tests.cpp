// The allocator's GPU tests on a real NVIDIA GPU: umem memory used by CUDA kernels
// through the CUDA backend. A plain program with a PASS/FAIL line per check and a summary; exit
// status 0 only when every check passed (or when there is no CUDA device: SKIP).
// Build: tests/gpu_cuda/build.sh; run: tests/gpu_cuda/run.sh (README section "NVIDIA GPUs").
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <memory>
#include <thread>
#include <vector>

#include "kernels.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/core/error.hpp"
#include "umem/machine/live_machine.hpp"

namespace {

int failures = 0;
int checks = 0;

void check(bool ok, const std::string& what, const std::string& detail = "") {
  ++checks;
  if (!ok) ++failures;
  std::printf("%s: %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : " -- ",
              detail.c_str());
  std::fflush(stdout);
}

bool cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return true;
  check(false, call, cudaGetErrorString(e));
  return false;
}

std::uint32_t load(std::uint32_t* p) {
  return std::atomic_ref<std::uint32_t>(*p).load(std::memory_order_acquire);
}
void store(std::uint32_t* p, std::uint32_t v) {
  std::atomic_ref<std::uint32_t>(*p).store(v, std::memory_order_release);
}

// A kernel reads and writes umem memory; every value is checked on the CPU afterwards.
void kernel_reads_and_writes(umem::alloc::allocator& a) {
  const std::size_t n = (64u << 20) / sizeof(std::uint32_t);
  auto* p = static_cast<std::uint32_t*>(a.allocate(n * sizeof(std::uint32_t)));
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint32_t>(i * 2654435761u);
  if (!cuda_ok(static_cast<cudaError_t>(launch_scale(p, n, nullptr)), "launch scale") ||
      !cuda_ok(cudaDeviceSynchronize(), "scale kernel"))
    return;
  std::size_t wrong = 0, first = n;
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<std::uint32_t>(i * 2654435761u) * 2u + 1u && wrong++ == 0) first = i;
  check(wrong == 0, "a kernel read and wrote 64 MiB of umem memory in place (16M values checked)",
        wrong ? std::to_string(wrong) + " wrong values, first at " + std::to_string(first) : "");
  a.deallocate(p);
}

// The GPU sees umem memory at the CPU's address.
void device_pointer_is_host_pointer(umem::alloc::allocator& a) {
  void* p = a.allocate(1 << 20);
  void* inner = static_cast<char*>(p) + 4096;
  void* d = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&d, inner, 0);
  check(e == cudaSuccess && d == inner, "cudaHostGetDevicePointer(p) == p",
        e != cudaSuccess ? cudaGetErrorString(e) : "");
  cudaPointerAttributes attr{};
  const cudaError_t e2 = cudaPointerGetAttributes(&attr, inner);
  check(e2 == cudaSuccess && attr.type == cudaMemoryTypeHost && attr.devicePointer == inner &&
            attr.hostPointer == inner,
        "cudaPointerGetAttributes: registered host memory, device and host pointer equal",
        e2 != cudaSuccess ? cudaGetErrorString(e2) : "type " + std::to_string(attr.type));
  a.deallocate(p);
}

// CPU and GPU hand a counter back and forth through two flags in umem memory, both sides
// running at once; each side gives up after a timeout instead of hanging.
void flags_ping_pong(umem::alloc::allocator& a) {
  constexpr std::uint32_t rounds = 10000;
  auto* flags = static_cast<std::uint32_t*>(a.allocate(4096));
  std::uint32_t* to_gpu = flags;
  std::uint32_t* to_cpu = flags + 32;  // another 128-byte line
  int* status = reinterpret_cast<int*>(flags + 64);
  store(to_gpu, 0);
  store(to_cpu, 0);
  *status = 0;
  cudaStream_t s = nullptr;
  if (!cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return;
  if (!cuda_ok(static_cast<cudaError_t>(
                   launch_ping_pong(to_gpu, to_cpu, rounds, 10'000'000'000ull, status, s)),
               "launch ping_pong"))
    return;
  const auto start = std::chrono::steady_clock::now();
  std::uint32_t done = 0;
  bool timed_out = false;
  for (std::uint32_t i = 1; i <= rounds && !timed_out; ++i) {
    store(to_gpu, i);
    while (load(to_cpu) != i) {
      if (std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
        timed_out = true;
        break;
      }
    }
    if (!timed_out) done = i;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  store(to_gpu, rounds + 1);  // never matches: lets a waiting kernel time out rather than hang
  cuda_ok(cudaStreamSynchronize(s), "ping_pong kernel");
  char detail[128];
  std::snprintf(detail, sizeof detail, "%u of %u rounds in %.1f ms (%.2f us per round trip)", done,
                rounds, ms, done ? ms * 1000.0 / done : 0.0);
  check(done == rounds && *status == 1,
        "CPU and GPU exchanged flags in fine-grained umem memory concurrently",
        std::string(detail) + ", kernel status " + std::to_string(*status));
  cudaStreamDestroy(s);
  a.deallocate(flags);
}

// The runtime's stream event (for the torch bridge): pending while a kernel waits on a flag the
// CPU has not set, complete after.
void stream_event_orders_reuse(const umem::machine::live_machine& m, umem::alloc::allocator& a) {
  auto* cells = static_cast<std::uint32_t*>(a.allocate(4096));
  std::uint32_t* flag = cells;
  std::uint32_t* done = cells + 32;
  store(flag, 0);
  store(done, 0);
  cudaStream_t s = nullptr;
  if (!cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate")) return;
  auto ev = m.runtime->make_stream_event(0);
  if (!cuda_ok(static_cast<cudaError_t>(launch_wait_flag(flag, 10'000'000'000ull, done, s)),
               "launch wait_flag"))
    return;
  ev->record(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const bool pending = !ev->query();
  store(flag, 1);
  ev->synchronize();
  check(pending && ev->query() && load(done) == 1,
        "stream_event: pending while the kernel runs, complete after synchronize()",
        "pending=" + std::to_string(pending) + " done=" + std::to_string(load(done)));
  cudaStreamDestroy(s);
  a.deallocate(cells);
}

// Freed memory is reused and trimmed segments are unregistered: a second round of kernels on
// fresh allocations after trim() still works.
void reuse_after_trim(umem::alloc::allocator& a) {
  const std::size_t released = a.trim();
  const std::size_t n = 1 << 20;
  auto* p = static_cast<std::uint32_t*>(a.allocate(n * sizeof(std::uint32_t)));
  for (std::size_t i = 0; i < n; ++i) p[i] = 7;
  launch_scale(p, n, nullptr);
  const bool ok = cudaDeviceSynchronize() == cudaSuccess && p[0] == 15 && p[n - 1] == 15;
  check(released > 0 && ok, "trim() unregistered cached segments; new memory works on the GPU",
        "released " + std::to_string(released) + " bytes");
  a.deallocate(p);
}

// Memory umem did not allocate (Note [Foreign registrations]): registered for the handles' life,
// a kernel reads and writes it in place; pages the driver cannot pin are refused as unsupported.
void foreign_memory_is_registered_for_the_handles_life(umem::alloc::allocator& a) {
  const std::size_t n = (16u << 20) / sizeof(std::uint32_t);
  std::vector<std::uint32_t> v(n + 7);  // glibc's memory, not page-aligned
  std::uint32_t* p = v.data() + 7;
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint32_t>(i);
  check(a.pins_foreign(), "the CUDA mapper pins foreign memory (registration mode)");
  std::shared_ptr<void> first, second;
  try {
    first = a.register_foreign(p, n * sizeof(std::uint32_t));
    second = a.register_foreign(p + 1000, 64);  // inside the same pages: shared
  } catch (const std::exception& e) {
    check(false, "register_foreign of 16 MiB of a std::vector", e.what());
    return;
  }
  void* d = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&d, p, 0);
  check(e == cudaSuccess && d == p, "a foreign range is registered at its host address",
        e != cudaSuccess ? cudaGetErrorString(e) : "");
  if (!cuda_ok(static_cast<cudaError_t>(launch_scale(p, n, nullptr)), "launch scale") ||
      !cuda_ok(cudaDeviceSynchronize(), "scale kernel"))
    return;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) wrong += p[i] != static_cast<std::uint32_t>(i) * 2u + 1u;
  check(wrong == 0, "a kernel read and wrote 16 MiB of a std::vector in place",
        std::to_string(wrong) + " wrong values");
  first.reset();
  check(cudaHostGetDevicePointer(&d, p, 0) == cudaSuccess,
        "the registration stays while another handle holds it");
  second.reset();
  const cudaError_t gone = cudaHostGetDevicePointer(&d, p, 0);
  (void)cudaGetLastError();
  check(gone != cudaSuccess, "the last handle unregisters it", cudaGetErrorString(gone));
  const long page = sysconf(_SC_PAGESIZE);
  void* ro = mmap(nullptr, static_cast<std::size_t>(page), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                  -1, 0);
  try {
    (void)a.register_foreign(ro, 64);
    check(false, "a read-only page is refused");
  } catch (const umem::error& x) {
    check(x.code() == umem::errc::unsupported, "a read-only page is refused as unsupported",
          x.what());
  }
  munmap(ro, static_cast<std::size_t>(page));
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device here (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
  }
  cudaSetDevice(0);
  cudaFree(nullptr);  // make the primary context current, as PyTorch does
  try {
    const auto m = umem::machine::discover_live_machine();
    check(m.runtime->kind() == umem::machine::gpu_runtime_kind::cuda,
          "the live machine selected the CUDA backend",
          m.topo.gpu_backend.name + ": " + m.topo.gpu_backend.reason);
    umem::alloc::allocator a(umem::alloc::alloc_options{});
    check(a.gpu_accessible(), "the allocator's memory is GPU-accessible", a.describe());
    kernel_reads_and_writes(a);
    device_pointer_is_host_pointer(a);
    flags_ping_pong(a);
    stream_event_orders_reuse(m, a);
    reuse_after_trim(a);
    foreign_memory_is_registered_for_the_handles_life(a);
  } catch (const std::exception& e) {
    check(false, "no exception", e.what());
  }
  std::printf("SUMMARY: %d checks, %d passed, %d failed: %s\n", checks, checks - failures,
              failures, failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
