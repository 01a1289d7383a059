// The `hardware` tier's HIP interop, for an MI300A owner. HIP accepts in its memory calls only
// pointers it knows (clr hipamd/src/hip_memory.cpp, getMemoryObject), so in a process that has
// HIP loaded umem registers every GPU-visible segment with hipHostRegister and unregisters it
// before giving it back (Note [GPU visibility under HIP] in
// allocator/include/umem/allocator/gpu/hip_gpu_mapper.hpp). This binary maps the real HIP first,
// as PyTorch for ROCm does at `import torch`, then makes umem's allocator, and checks for every
// GPU D, on a block of umem host memory on D's NUMA node and on a `device:D` block:
//   - hipPointerGetAttributes and hipHostGetDevicePointer give a device pointer, the host address;
//   - hipMemset and hipMemcpy of every kind, hipMemsetAsync and hipMemcpyAsync on a stream, with
//     every value read back on the CPU;
//   - a kernel compiled at run time by hiprtc reads the block and writes its sum into another
//     umem block (skipped alone, saying why, where libhiprtc is missing);
//   - after trim() and after the allocator's destruction HIP no longer knows the memory.
// ctest runs this binary twice, with HSA_XNACK=0 and HSA_XNACK=1 (umem registers with HIP in
// both modes). Every test skips, printing "hardware tier: <why>", where HIP cannot be loaded,
// where HIP finds no GPU, or where a GPU is not an APU (these checks read `device:D` memory on
// the CPU); ctest reports the run as Skipped only then (tests/hardware/CMakeLists.txt).
// Its own binary: once HIP is mapped every allocator of the process registers with it, and
// gpu_mapper_hardware_test.cpp checks the ROCr-only path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "real_hip.hpp"
#include "umem/allocator/alloc_config.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/placement.hpp"

namespace {

using namespace umem::alloc;
using namespace umem::hw_test;

constexpr std::size_t kBytes = std::size_t{6} << 20;  // several MiB: three huge pages
constexpr std::size_t kWords = kBytes / sizeof(std::uint32_t);

// The runtimes as this process mapped them, once: a table, or why there is none ("absent"), or
// a library that lacks a symbol ("broken", a failure rather than a skip).
template <class Functions>
struct process_runtime {
  std::optional<mapped_runtime<Functions>> runtime;
  std::string absent;
  std::string broken;
};

template <class Functions>
process_runtime<Functions> map_once(map_result<Functions> (*map)()) {
  process_runtime<Functions> s;
  try {
    auto m = map();
    s.runtime = std::move(m.runtime);
    s.absent = std::move(m.absent);
  } catch (const std::exception& e) {
    s.broken = e.what();
  }
  return s;
}

const process_runtime<hip_functions>& process_hip() {
  static const process_runtime<hip_functions> hip = map_once(&map_hip);
  return hip;
}

const process_runtime<hiprtc_functions>& process_hiprtc() {
  static const process_runtime<hiprtc_functions> rtc = map_once(&map_hiprtc);
  return rtc;
}

std::uint32_t pattern(std::size_t i, std::uint32_t seed) {
  return static_cast<std::uint32_t>(i * 2654435761u) ^ (seed * 0x9E3779B9u);
}

void fill(std::uint32_t* words, std::uint32_t seed) {
  for (std::size_t i = 0; i < kWords; ++i) words[i] = pattern(i, seed);
}

std::size_t mismatches(const std::uint32_t* words, std::uint32_t seed) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kWords; ++i) wrong += words[i] != pattern(i, seed);
  return wrong;
}

std::size_t bytes_other_than(const void* p, std::size_t begin, std::size_t end, unsigned char v) {
  const auto* bytes = static_cast<const unsigned char*>(p);
  return static_cast<std::size_t>(
      std::count_if(bytes + begin, bytes + end, [v](unsigned char b) { return b != v; }));
}

// A umem allocation, given back when it goes out of scope (or by release()).
class umem_block {
 public:
  umem_block(allocator& a, std::size_t bytes, const request& r)
      : alloc_(&a), p_(a.allocate(bytes, r)) {}
  ~umem_block() { release(); }
  umem_block(const umem_block&) = delete;
  umem_block& operator=(const umem_block&) = delete;

  void release() {
    if (p_ != nullptr) alloc_->deallocate(std::exchange(p_, nullptr));
  }
  void* get() const { return p_; }
  std::uint32_t* words() const { return static_cast<std::uint32_t*>(p_); }

 private:
  allocator* alloc_;
  void* p_;
};

// Plain malloc memory: pageable, unknown to HIP, like a CPU tensor's.
class malloc_words {
 public:
  malloc_words() : p_(static_cast<std::uint32_t*>(std::malloc(kBytes))) {}
  ~malloc_words() { std::free(p_); }
  malloc_words(const malloc_words&) = delete;
  malloc_words& operator=(const malloc_words&) = delete;
  std::uint32_t* get() const { return p_; }

 private:
  std::uint32_t* p_;
};

template <class F>
struct at_scope_end {
  F f;
  ~at_scope_end() { f(); }
};
template <class F>
at_scope_end(F) -> at_scope_end<F>;

// One block to check: HIP device `device` (the same index as umem's device:D, topology::gpus()
// order) and a request for memory it uses.
struct target {
  int device = 0;
  std::string name;  // "GPU 1, node:1" or "GPU 1, device:1"
  request req;
};

// One block of 256 threads sums n words into *out (no atomics: the last step is one thread's).
constexpr const char* kSumKernel = R"(
extern "C" __global__ void umem_sum_words(const unsigned int* in, unsigned long long n,
                                          unsigned long long* out) {
  __shared__ unsigned long long partial[256];
  unsigned long long s = 0;
  for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) s += in[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}
)";
constexpr unsigned kThreads = 256;

class HipInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& h = process_hip();
    if (!h.broken.empty()) FAIL() << h.broken;
    if (!h.runtime) GTEST_SKIP() << "hardware tier: no HIP runtime: " << h.absent;
    hip_ = &*h.runtime;
    int count = 0;
    const hip_error e = fn().hipGetDeviceCount(&count);
    if (e != hip_success || count <= 0)
      GTEST_SKIP() << "hardware tier: HIP finds no GPU: hipGetDeviceCount returned "
                   << error_text(e) << ", " << count << " devices (HIP " << hip_->library << ")";
    // After HIP is mapped, so that umem registers what it makes with HIP.
    alloc_ = std::make_unique<allocator>(options_from_environment());
    const auto gpus = alloc_->topo().gpus();
    for (std::size_t d = 0; d < gpus.size(); ++d)
      if (gpus[d]->is_apu == false)
        GTEST_SKIP() << "hardware tier: not an APU: GPU " << d << " (" << gpus[d]->marketing_name
                     << ") has memory of its own, which these checks cannot read on the CPU";
    ASSERT_EQ(gpus.size(), static_cast<std::size_t>(count))
        << "umem's topology and HIP see different GPUs (HIP_VISIBLE_DEVICES set?)";
    devices_ = count;
    print_setup_once();
  }

  const hip_functions& fn() const { return hip_->fn; }
  std::string error_text(hip_error e) const { return hip_error_text(fn(), e); }

  // Success, or a failure naming the HIP call and its hipError.
  ::testing::AssertionResult ok(hip_error e, const std::string& call) const {
    if (e == hip_success) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << call << " failed: " << error_text(e);
  }

  ::testing::AssertionResult copy(void* dst, const void* src, std::size_t bytes,
                                  memcpy_kind kind) const {
    return ok(fn().hipMemcpy(dst, src, bytes, static_cast<int>(kind)),
              std::string("hipMemcpy(") + to_string(kind) + ")");
  }

  // HIP knows `p` and maps it at the same address (zero-copy, as umem requires).
  ::testing::AssertionResult known_to_hip(const void* p) const {
    hip_pointer_attributes a{};
    if (auto r = ok(fn().hipPointerGetAttributes(&a, p), "hipPointerGetAttributes"); !r) return r;
    if (a.device_pointer == nullptr)
      return ::testing::AssertionFailure()
             << "hipPointerGetAttributes: " << p << " is not registered with HIP (no device "
             << "pointer); umem: " << alloc_->describe();
    if (a.device_pointer != p)
      return ::testing::AssertionFailure()
             << "hipPointerGetAttributes: device pointer " << a.device_pointer << " for " << p;
    return ::testing::AssertionSuccess();
  }

  // HIP does not know `p`: hipSuccess without a device pointer (ROCm 6 and later report
  // hipMemoryTypeUnregistered) or hipErrorInvalidValue (ROCm 5).
  ::testing::AssertionResult unknown_to_hip(const void* p) const {
    hip_pointer_attributes a{};
    const hip_error e = fn().hipPointerGetAttributes(&a, p);
    if (e == hip_error_invalid_value || (e == hip_success && a.device_pointer == nullptr))
      return ::testing::AssertionSuccess();
    if (e != hip_success) return ok(e, "hipPointerGetAttributes");
    return ::testing::AssertionFailure()
           << "HIP still knows " << p << " (device pointer " << a.device_pointer
           << "): it was not unregistered before umem gave it back";
  }

  // For every GPU, a block on its NUMA node (a host placement) and a device:D block.
  std::vector<target> targets() const {
    std::vector<target> out;
    const auto gpus = alloc_->topo().gpus();
    for (int d = 0; d < devices_; ++d) {
      const std::uint32_t kfd = gpus[static_cast<std::size_t>(d)]->kfd_node;
      const auto& map = alloc_->topo().gpu_numa;
      const auto b = std::find_if(map.begin(), map.end(),
                                  [&](const auto& x) { return x.gpu_kfd_node == kfd; });
      if (b != map.end() && b->numa_node) {
        const int node = *b->numa_node;
        out.push_back({d, "GPU " + std::to_string(d) + ", node:" + std::to_string(node),
                       request{placement{placement_kind::node, node, {}}, std::nullopt}});
      } else {
        ADD_FAILURE() << "GPU " << d << " (KFD node " << kfd << ") has no NUMA node in umem's "
                      << "topology";
      }
      out.push_back({d, "GPU " + std::to_string(d) + ", device:" + std::to_string(d),
                     request{placement{placement_kind::device, d, {}}, std::nullopt}});
    }
    return out;
  }

  // The GPU's target id from ROCr's ISA name ("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"), for
  // hiprtc where it cannot find the current device's itself; empty when unknown.
  std::string target_id(int device) const {
    const auto* gpu = alloc_->topo().gpus()[static_cast<std::size_t>(device)];
    if (gpu->isas.empty()) return {};
    const std::string& isa = gpu->isas.front();
    const auto dashes = isa.rfind("--");
    return dashes == std::string::npos ? isa : isa.substr(dashes + 2);
  }

  void print_setup_once() const {
    static bool printed = false;
    if (std::exchange(printed, true)) return;
    int version = 0;
    (void)fn().hipRuntimeGetVersion(&version);
    const char* xnack = std::getenv("HSA_XNACK");
    std::printf("HIP %s (runtime version %d), %d GPU(s), HSA_XNACK=%s\numem %s\n",
                hip_->library.c_str(), version, devices_, xnack != nullptr ? xnack : "(unset)",
                alloc_->describe().c_str());
  }

  const mapped_runtime<hip_functions>* hip_ = nullptr;
  std::unique_ptr<allocator> alloc_;
  int devices_ = 0;
};

TEST_F(HipInterop, UmemMemoryIsRegisteredWithHipAtItsOwnAddress) {
  for (const target& t : targets()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ok(fn().hipSetDevice(t.device), "hipSetDevice"));
    umem_block b(*alloc_, kBytes, t.req);
    EXPECT_EQ(alloc_->kind_of(b.get()), memory_kind::host) << "an APU's memory is host memory";
    EXPECT_TRUE(known_to_hip(b.get()));
    EXPECT_TRUE(known_to_hip(static_cast<char*>(b.get()) + kBytes / 2)) << "an interior pointer";
    void* device_pointer = nullptr;
    EXPECT_TRUE(ok(fn().hipHostGetDevicePointer(&device_pointer, b.get(), 0),
                   "hipHostGetDevicePointer"));
    EXPECT_EQ(device_pointer, b.get()) << "hipHostGetDevicePointer: not the host address";
  }
}

TEST_F(HipInterop, MemsetAndEveryCopyKindWorkOnUmemMemory) {
  malloc_words host_in, host_out;
  ASSERT_NE(host_in.get(), nullptr);
  ASSERT_NE(host_out.get(), nullptr);
  for (const target& t : targets()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ok(fn().hipSetDevice(t.device), "hipSetDevice"));
    umem_block a(*alloc_, kBytes, t.req), b(*alloc_, kBytes, t.req);

    // hipMemset of the whole block, then of an interior range that starts and ends mid-page.
    ASSERT_TRUE(ok(fn().hipMemset(a.get(), 0x5A, kBytes), "hipMemset"));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(bytes_other_than(a.get(), 0, kBytes, 0x5A), 0u) << "after hipMemset";
    constexpr std::size_t edge = 4097;
    ASSERT_TRUE(ok(fn().hipMemset(static_cast<char*>(a.get()) + edge, 0xC3, kBytes - 2 * edge),
                   "hipMemset (interior)"));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(bytes_other_than(a.get(), 0, edge, 0x5A) +
                  bytes_other_than(a.get(), kBytes - edge, kBytes, 0x5A),
              0u) << "hipMemset (interior) wrote outside its range";
    EXPECT_EQ(bytes_other_than(a.get(), edge, kBytes - edge, 0xC3), 0u) << "hipMemset (interior)";

    fill(host_in.get(), 1);
    ASSERT_TRUE(copy(a.get(), host_in.get(), kBytes, memcpy_kind::host_to_device));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(mismatches(a.words(), 1), 0u) << "malloc memory -> umem, hipMemcpyHostToDevice";

    std::memset(host_out.get(), 0, kBytes);
    ASSERT_TRUE(copy(host_out.get(), a.get(), kBytes, memcpy_kind::device_to_host));
    EXPECT_EQ(mismatches(host_out.get(), 1), 0u) << "umem -> malloc memory, hipMemcpyDeviceToHost";

    ASSERT_TRUE(copy(b.get(), a.get(), kBytes, memcpy_kind::device_to_device));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(mismatches(b.words(), 1), 0u) << "umem -> umem, hipMemcpyDeviceToDevice";

    fill(a.words(), 2);  // written by the CPU
    ASSERT_TRUE(copy(b.get(), a.get(), kBytes, memcpy_kind::host_to_host));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(mismatches(b.words(), 2), 0u) << "umem -> umem, hipMemcpyHostToHost";

    fill(host_in.get(), 3);
    ASSERT_TRUE(copy(a.get(), host_in.get(), kBytes, memcpy_kind::by_pointer));
    ASSERT_TRUE(copy(b.get(), a.get(), kBytes, memcpy_kind::by_pointer));
    std::memset(host_out.get(), 0, kBytes);
    ASSERT_TRUE(copy(host_out.get(), b.get(), kBytes, memcpy_kind::by_pointer));
    ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize"));
    EXPECT_EQ(mismatches(b.words(), 3), 0u) << "malloc -> umem -> umem, hipMemcpyDefault";
    EXPECT_EQ(mismatches(host_out.get(), 3), 0u) << "umem -> malloc memory, hipMemcpyDefault";
  }
}

// PyTorch for ROCm fills and copies tensors with the Async calls on its streams
// (aten/src/ATen/native/cuda/Copy.cu, hipified).
TEST_F(HipInterop, AsyncFillsAndCopiesOnAStreamWorkOnUmemMemory) {
  malloc_words host_in, host_out;
  ASSERT_NE(host_in.get(), nullptr);
  ASSERT_NE(host_out.get(), nullptr);
  for (const target& t : targets()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ok(fn().hipSetDevice(t.device), "hipSetDevice"));
    hip_stream s = nullptr;
    ASSERT_TRUE(ok(fn().hipStreamCreate(&s), "hipStreamCreate"));
    const at_scope_end destroy{[&] { (void)fn().hipStreamDestroy(s); }};
    umem_block a(*alloc_, kBytes, t.req), b(*alloc_, kBytes, t.req);

    ASSERT_TRUE(ok(fn().hipMemsetAsync(a.get(), 0x3C, kBytes, s), "hipMemsetAsync"));
    ASSERT_TRUE(ok(fn().hipStreamSynchronize(s), "hipStreamSynchronize"));
    EXPECT_EQ(bytes_other_than(a.get(), 0, kBytes, 0x3C), 0u) << "after hipMemsetAsync";

    fill(host_in.get(), 4);
    std::memset(host_out.get(), 0, kBytes);
    const auto async = [&](void* dst, const void* src, memcpy_kind kind) {
      return ok(fn().hipMemcpyAsync(dst, src, kBytes, static_cast<int>(kind), s),
                std::string("hipMemcpyAsync(") + to_string(kind) + ")");
    };
    ASSERT_TRUE(async(a.get(), host_in.get(), memcpy_kind::host_to_device));
    ASSERT_TRUE(async(b.get(), a.get(), memcpy_kind::device_to_device));
    ASSERT_TRUE(async(host_out.get(), b.get(), memcpy_kind::device_to_host));
    ASSERT_TRUE(ok(fn().hipStreamSynchronize(s), "hipStreamSynchronize"));
    EXPECT_EQ(mismatches(a.words(), 4), 0u) << "malloc memory -> umem, hipMemcpyAsync";
    EXPECT_EQ(mismatches(b.words(), 4), 0u) << "umem -> umem, hipMemcpyAsync";
    EXPECT_EQ(mismatches(host_out.get(), 4), 0u) << "umem -> malloc memory, hipMemcpyAsync";
  }
}

TEST_F(HipInterop, AKernelReadsUmemMemoryAndWritesItsSumIntoUmemMemory) {
  const auto& rtc = process_hiprtc();
  if (!rtc.broken.empty()) FAIL() << rtc.broken;
  if (!rtc.runtime) GTEST_SKIP() << "the kernel check needs hiprtc: " << rtc.absent;
  const std::vector<target> all = targets();
  for (int d = 0; d < devices_; ++d) {
    SCOPED_TRACE("GPU " + std::to_string(d));
    ASSERT_TRUE(ok(fn().hipSetDevice(d), "hipSetDevice"));
    const compiled_kernel k = compile_kernel(rtc.runtime->fn, kSumKernel, target_id(d));
    ASSERT_FALSE(k.code.empty()) << k.failure;
    hip_module module = nullptr;
    ASSERT_TRUE(ok(fn().hipModuleLoadData(&module, k.code.data()), "hipModuleLoadData"));
    const at_scope_end unload{[&] { (void)fn().hipModuleUnload(module); }};
    hip_function sum = nullptr;
    ASSERT_TRUE(ok(fn().hipModuleGetFunction(&sum, module, "umem_sum_words"),
                   "hipModuleGetFunction"));
    std::printf("GPU %d: kernel compiled by hiprtc %s (%zu bytes)\n", d, k.how.c_str(),
                k.code.size());
    std::fflush(stdout);  // a GPU fault aborts the process: say what ran first
    for (const target& t : all) {
      if (t.device != d) continue;
      SCOPED_TRACE(t.name);
      umem_block in(*alloc_, kBytes, t.req), out(*alloc_, sizeof(std::uint64_t), t.req);
      fill(in.words(), 5 + static_cast<std::uint32_t>(d));
      std::uint64_t expected = 0;
      for (std::size_t i = 0; i < kWords; ++i) expected += in.words()[i];
      auto* result = static_cast<std::uint64_t*>(out.get());
      *result = ~std::uint64_t{0};
      void* in_arg = in.get();
      unsigned long long n_arg = kWords;
      void* out_arg = out.get();
      void* args[] = {&in_arg, &n_arg, &out_arg};
      ASSERT_TRUE(ok(fn().hipModuleLaunchKernel(sum, 1, 1, 1, kThreads, 1, 1, 0, nullptr, args,
                                                nullptr),
                     "hipModuleLaunchKernel"));
      ASSERT_TRUE(ok(fn().hipDeviceSynchronize(), "hipDeviceSynchronize (after the kernel)"));
      EXPECT_EQ(*result, expected) << "the kernel's sum, read by the CPU";
    }
  }
}

// umem gives a registered segment back only after hipHostUnregister: HIP must not know its
// addresses once trim() has returned it.
TEST_F(HipInterop, TrimUnregistersSegmentsItGivesBack) {
  std::vector<std::unique_ptr<umem_block>> blocks;
  for (const target& t : targets()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ok(fn().hipSetDevice(t.device), "hipSetDevice"));
    blocks.push_back(std::make_unique<umem_block>(*alloc_, kBytes, t.req));
    ASSERT_TRUE(known_to_hip(blocks.back()->get())) << "before trim";
  }
  std::vector<const void*> given_back;
  for (auto& b : blocks) {
    given_back.push_back(b->get());
    b->release();
  }
  const std::size_t released = alloc_->trim();
  EXPECT_GE(released, blocks.size() * kBytes) << "trim() returned fewer bytes than were freed";
  for (const void* p : given_back) EXPECT_TRUE(unknown_to_hip(p)) << "after trim()";
}

TEST_F(HipInterop, DestroyingTheAllocatorUnregistersItsSegments) {
  std::vector<const void*> given_back;
  for (const target& t : targets()) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(ok(fn().hipSetDevice(t.device), "hipSetDevice"));
    umem_block b(*alloc_, kBytes, t.req);
    ASSERT_TRUE(known_to_hip(b.get())) << "before the allocator's destruction";
    given_back.push_back(b.get());
  }  // each block goes back to its (cached) segment here
  alloc_.reset();
  for (const void* p : given_back) EXPECT_TRUE(unknown_to_hip(p)) << "after ~allocator()";
}

}  // namespace
