// hip_gpu_mapper (Note [GPU visibility under HIP]) on the ROCr double serving the real 4-socket
// MI300A capture, with the HIP double attached to it as libamdhip64 runs over libhsa-runtime64:
// what PyTorch for ROCm does with a tensor's memory (fill, copy of each kind, pointer queries)
// must be accepted by HIP's rules, which the double enforces as clr does.
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "hip_runtime/hip_test_env.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/gpu_visibility.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/core/error.hpp"
#include "umem/hip_runtime/hip_compat.hpp"
#include "umem/machine/gpu_runtime.hpp"

namespace umem::alloc::test {
namespace {

using umem::test::mapped_hip_double;
namespace hc = umem::hip::hip_compat;
using machine::make_rocr_runtime;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Page-aligned anonymous memory, as umem's host source hands out.
struct pages {
  void* base = nullptr;
  std::size_t size = 0;
  explicit pages(std::size_t n) : size(n) {
    base = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) base = nullptr;
  }
  ~pages() {
    if (base != nullptr) munmap(base, size);
  }
  pages(const pages&) = delete;
  pages& operator=(const pages&) = delete;
  unsigned char* bytes() const { return static_cast<unsigned char*>(base); }
};

class HipGpuMapper : public GpuMapperDouble {
 protected:
  void start_with_hip() {
    ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
    hip_.emplace(UMEM_HIP_DOUBLE_PATH);
    ASSERT_TRUE(hip_->ok()) << dlerror();
    ASSERT_EQ(hip_->attach_rocr(UMEM_ROCR_DOUBLE_PATH), 0) << hip_->last_message();
    hip_->reset(4);
    auto rt =
        umem::hip::hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PATH});
    ASSERT_TRUE(rt.has_value());
    hip_rt_ = std::make_shared<const umem::hip::hip_runtime>(*std::move(rt));
    hip_mapper_ = std::make_unique<hip_gpu_mapper>(hip_rt_, "test");
    umem::test::double_reset(path_);
  }
  void TearDown() override {
    hip_mapper_.reset();
    if (hip_) hip_->detach_rocr();
  }

  int memset(void* p, int v, std::size_t n) { return hip_->memset(p, v, n); }
  int memcpy(void* d, const void* s, std::size_t n, int kind) {
    return hip_->memcpy(d, s, n, kind);
  }
  void* device_pointer(const void* p) {
    hc::pointer_attributes a;
    EXPECT_EQ(hip_rt_->fn().hipPointerGetAttributes(&a, p), 0);
    return a.device_pointer;
  }
  // The double's HIP lock lines of the ROCr log since the last take_log.
  std::vector<std::string> locks() {
    std::vector<std::string> out;
    for (const auto& l : take_log())
      if (contains(l, "memory_lock")) out.push_back(l);
    return out;
  }

  std::optional<mapped_hip_double> hip_;
  std::shared_ptr<const umem::hip::hip_runtime> hip_rt_;
  std::unique_ptr<hip_gpu_mapper> hip_mapper_;
};

segment on_pages(const pages& p, coherence kind) {
  return segment{p.base, p.size, node_binding{bind_mode::bind, {0}}, kind, true};
}

TEST_F(HipGpuMapper, ARegisteredSegmentIsAcceptedByEveryCopyAndFillPyTorchMakes) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(kSegment), b(kSegment);
  ASSERT_NE(a.base, nullptr);
  ASSERT_NE(b.base, nullptr);
  hip_mapper_->map(on_pages(a, coherence::coarse));
  hip_mapper_->map(on_pages(b, coherence::fine));
  // HIP locked each range once per device (clr roc::Buffer::create), umem never.
  EXPECT_EQ(locks().size(), 8u);
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 2);

  ASSERT_EQ(memset(a.base, 0x5a, kSegment), hc::result::success);
  EXPECT_EQ(a.bytes()[kSegment - 1], 0x5a);
  ASSERT_EQ(memcpy(b.base, a.base, kSegment, umem::test::hip_device_to_device),
            hc::result::success);
  EXPECT_EQ(b.bytes()[12345], 0x5a);
  std::vector<unsigned char> host(4096, 0x11), back(4096, 0);
  ASSERT_EQ(memcpy(a.base, host.data(), host.size(), umem::test::hip_host_to_device),
            hc::result::success);
  ASSERT_EQ(memcpy(back.data(), a.base, back.size(), umem::test::hip_device_to_host),
            hc::result::success);
  EXPECT_EQ(back, host);
  ASSERT_EQ(memcpy(b.base, a.base, 4096, umem::test::hip_memcpy_default), hc::result::success);
  EXPECT_EQ(device_pointer(a.base), a.base);
  EXPECT_EQ(device_pointer(a.bytes() + 4096), a.bytes() + 4096);
  EXPECT_EQ(hip_->cpu_copies(), 0);

  hip_mapper_->unmap(on_pages(a, coherence::coarse));
  hip_mapper_->unmap(on_pages(b, coherence::fine));
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->live_registrations(), 0);
  EXPECT_EQ(memset(a.base, 0, 16), hc::result::invalid_value);  // unknown again
}

TEST_F(HipGpuMapper, MemoryRocrAloneMadeGpuAccessibleIsRefusedByHip) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(kSegment), b(kSegment);
  mapper_->map(on_pages(a, coherence::coarse));  // the ROCr mapper: a lock and nothing else
  mapper_->map(on_pages(b, coherence::coarse));
  EXPECT_EQ(memset(a.base, 0x5a, kSegment), hc::result::invalid_value);
  EXPECT_EQ(memcpy(b.base, a.base, kSegment, umem::test::hip_device_to_device),
            hc::result::invalid_value);
  EXPECT_EQ(device_pointer(a.base), nullptr);
  mapper_->unmap(on_pages(a, coherence::coarse));
  mapper_->unmap(on_pages(b, coherence::coarse));
}

TEST_F(HipGpuMapper, ExtendedFineIsRefusedWithTheReason) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(kSegment);
  try {
    hip_mapper_->map(on_pages(a, coherence::extended_fine));
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_TRUE(contains(e.what(), "extended_fine memory cannot be made known to HIP")) << e.what();
  }
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 0);
}

TEST_F(HipGpuMapper, MemoryHipKnowsAlreadyIsNeverRegisteredTwice) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(kSegment);
  ASSERT_EQ(hip_rt_->fn().hipHostRegister(a.base, a.size, 0), hc::result::success);
  try {
    hip_mapper_->map(on_pages(a, coherence::fine));
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::runtime_error);
    EXPECT_TRUE(contains(e.what(), "HIP already knows")) << e.what();
  }
  EXPECT_EQ(hip_->leaked_registrations(), 0);
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 1);  // the test's own
  ASSERT_EQ(hip_rt_->fn().hipHostUnregister(a.base), hc::result::success);
}

TEST_F(HipGpuMapper, AFailedRegistrationIsOutOfMemoryOrNamesTheCallAndLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(kSegment);
  for (const auto& [status, code, text] :
       {std::tuple{hc::result::out_of_memory, errc::out_of_memory, "hipErrorOutOfMemory"},
        std::tuple{hc::result::invalid_value, errc::out_of_memory, "could not pin the pages"},
        std::tuple{hc::result::unknown, errc::runtime_error, "hipErrorUnknown"}}) {
    SCOPED_TRACE(text);
    hip_->fail_next("hipHostRegister", status);
    try {
      hip_mapper_->map(on_pages(a, coherence::coarse));
      FAIL();
    } catch (const umem::error& e) {
      EXPECT_EQ(e.code(), code);
      EXPECT_TRUE(contains(e.what(), "hipHostRegister")) << e.what();
      EXPECT_TRUE(contains(e.what(), text)) << e.what();
    }
    EXPECT_EQ(hip_->known(a.base), 0);
    EXPECT_EQ(hip_->live_registrations(), 0);
  }
  EXPECT_TRUE(locks().empty());
}

TEST_F(HipGpuMapper, AliasesOfForeignMemoryShareOneRegistrationForTheirLife) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(4 * 4096);
  auto first = hip_mapper_->register_foreign(a.bytes() + 100, 5000);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(hip_->known(a.base), 1);  // page-rounded: from the page holding the first byte
  EXPECT_EQ(memset(a.bytes() + 100, 7, 5000), hc::result::success);
  auto second = hip_mapper_->register_foreign(a.bytes() + 200, 100);  // the same pages
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 1);
  first.reset();
  EXPECT_EQ(hip_->known(a.base), 1);  // the second alias still uses it
  second.reset();
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->attempts("hipHostUnregister"), 1);
}

TEST_F(HipGpuMapper, AForeignRangeKnownOnlyInPartIsRefusedAndHipsOwnMemoryNeedsNothing) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(4 * 4096);
  auto held = hip_mapper_->register_foreign(a.base, 4096);
  try {
    (void)hip_mapper_->register_foreign(a.bytes() + 2048, 4096);  // pages 0 and 1
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_TRUE(contains(e.what(), "only in part")) << e.what();
  }
  void* pinned = nullptr;
  ASSERT_EQ(hip_->host_malloc(&pinned, 8192), hc::result::success);
  const long before = hip_->attempts("hipHostRegister");
  EXPECT_EQ(hip_mapper_->register_foreign(pinned, 8192), nullptr);
  EXPECT_EQ(hip_->attempts("hipHostRegister"), before);
  EXPECT_EQ(hip_->host_free(pinned), hc::result::success);
}

// HIP keeps a registration's exact bytes: someone else's 64 bytes at a page's start leave the
// caller's own bytes further in unknown, but the page-rounded registration would register those
// 64 bytes twice. Known in part, so refused as unsupported (the caller copies), not an error.
TEST_F(HipGpuMapper, AForeignRangeWhosePageSomeoneElseRegisteredInPartIsUnsupported) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  pages a(2 * 4096);
  ASSERT_EQ(hip_rt_->fn().hipHostRegister(a.base, 64, 0), hc::result::success);
  ASSERT_EQ(hip_->known(a.bytes() + 128), 0);
  try {
    (void)hip_mapper_->register_foreign(a.bytes() + 128, 4096);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_TRUE(contains(e.what(), "HIP already knows")) << e.what();
  }
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 1);  // the test's own
  EXPECT_EQ(hip_->leaked_registrations(), 0);
  ASSERT_EQ(hip_rt_->fn().hipHostUnregister(a.base), hc::result::success);
}

// With XNACK off the registration is what lets the GPU reach foreign memory (pins_foreign), and
// KFD pins only writable pages (Note [What a lock pins] in the ROCr double): a read-only map is
// refused as unsupported, so the caller copies, and nothing stays registered.
TEST_F(HipGpuMapper, AReadOnlyForeignRangeIsRefusedAsUnsupported) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  EXPECT_TRUE(hip_mapper_->pins_foreign());
  pages a(2 * 4096);
  ASSERT_EQ(mprotect(a.base, a.size, PROT_READ), 0);
  try {
    (void)hip_mapper_->register_foreign(a.bytes() + 64, 4096);
    FAIL();
  } catch (const umem::error& e) {
    EXPECT_EQ(e.code(), errc::unsupported);
    EXPECT_TRUE(contains(e.what(), "hipErrorInvalidValue")) << e.what();
    EXPECT_TRUE(contains(e.what(), "pins only writable memory")) << e.what();
  }
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->live_registrations(), 0);
  ASSERT_EQ(mprotect(a.base, a.size, PROT_READ | PROT_WRITE), 0);
  auto held = hip_mapper_->register_foreign(a.bytes() + 64, 4096);  // writable now: pinned
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(hip_->known(a.base), 1);
}

// The one place that decides (make_gpu_mapper, gpu_visibility.hpp): on the ROCr runtime, memory
// is registered with HIP when the process has loaded it, whatever XNACK says, and its discrete
// GPUs' segments do not grow.
TEST_F(HipGpuMapper, TheRocrBackendRegistersWithHipWhenTheProcessLoadedIt) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  auto lib = std::make_shared<const rocr_library>(
      rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH}));
  {
    const scoped_env none("UMEM_HIP_RUNTIME_LIB", "libumem-no-such-hip.so");
    // Looked up by soname and by the variable: the double is neither, so HIP is "not loaded".
    const auto without = make_rocr_runtime(lib, "test");
    const auto rocr_only = make_gpu_mapper(*without, topo_);
    EXPECT_EQ(dynamic_cast<hip_gpu_mapper*>(rocr_only.get()), nullptr);
    EXPECT_TRUE(contains(rocr_only->describe(), "XNACK off: segments are locked"))
        << rocr_only->describe();
  }
  const scoped_env hip("UMEM_HIP_RUNTIME_LIB", UMEM_HIP_DOUBLE_PATH);
  const auto with = make_rocr_runtime(lib, "test");
  const auto mapper = make_gpu_mapper(*with, topo_);
  ASSERT_NE(dynamic_cast<hip_gpu_mapper*>(mapper.get()), nullptr) << mapper->describe();
  EXPECT_TRUE(contains(mapper->describe(),
                       "XNACK off, HIP loaded: segments are registered with "
                       "HIP"))
      << mapper->describe();
  EXPECT_FALSE(mapper->pageable());
}

// The allocator with the HIP mapper: registration happens per segment, never per allocation.
TEST_F(HipGpuMapper, TheCachedPathMakesNoHipCallAndATrimUnregistersFirst) {
  ASSERT_NO_FATAL_FAILURE(start_with_hip());
  allocator a(alloc_options{}, topo_, std::make_unique<host_numa_source>(host_source_config{}),
              std::move(hip_mapper_), {});
  void* p = a.allocate(1 << 20, request{parse_placement("node:0"), coherence::coarse});
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 1);
  EXPECT_EQ(hip_->known(p), 1);
  ASSERT_EQ(memset(p, 1, 1 << 20), hc::result::success);
  a.deallocate(p);
  const long calls = hip_->total_attempts();
  for (int i = 0; i < 100; ++i)
    a.deallocate(a.allocate(1 << 20, request{parse_placement("node:0"), coherence::coarse}));
  EXPECT_EQ(hip_->total_attempts(), calls);
  EXPECT_GT(a.trim(), 0u);
  EXPECT_EQ(hip_->attempts("hipHostUnregister"), 1);
  EXPECT_EQ(hip_->known(p), 0);
  EXPECT_EQ(hip_->live_registrations(), 0);
}

}  // namespace
}  // namespace umem::alloc::test
