// The HIP double's memory rules (Note [Which pointers HIP knows] in tests/hip_double), asserted on
// the doubles themselves: the HIP double attached to the ROCr double serving the real 4-socket
// MI300A capture, with XNACK off (the capture) and claimed on. What memory HIP accepts, and what
// it does to ROCr, must be what clr does.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hip_runtime/hip_test_env.hpp"
#include "hsa_runtime/rocr_test_env.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace {

namespace rc = umem::hsa::rocr_compat;
using umem::hsa::rocr_agent;
using umem::hsa::rocr_library;
using umem::hsa::rocr_pool;
using umem::test::mapped_hip_double;
using umem::test::scoped_env;

// hipError_t values the tests expect (hip_runtime_api.h).
constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidMemcpyDirection = 21,
              kNoDevice = 100, kNotFound = 500, kNotRegistered = 713;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<std::string> lines_with(const std::string& log, const std::string& part) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);)
    if (contains(l, part)) out.push_back(l);
  return out;
}

// Page-aligned host memory of the test's own (malloc memory to HIP).
struct host_pages {
  std::vector<unsigned char> bytes;
  unsigned char* base;
  std::size_t size;
  explicit host_pages(std::size_t n) : bytes(n + 4096), size(n) {
    auto p = reinterpret_cast<std::uintptr_t>(bytes.data());
    base = reinterpret_cast<unsigned char*>((p + 4095) / 4096 * 4096);
  }
};

// The ROCr double serving the MI300A capture with its own session (as umem would hold one), and
// the HIP double mapped as PyTorch maps libamdhip64 and attached to the same ROCr double.
class HipDouble : public ::testing::Test {
 protected:
  void start(bool xnack_on) {
    UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
    umem::topology machine = umem::test::import_capture(capture);
    if (xnack_on) umem::test::claim_xnack(machine, true);
    snap_env_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT",
                      umem::test::write_snapshot(dir_, machine).string());
    ver_env_.emplace("UMEM_ROCR_DOUBLE_VERSION", "7.1");
    lib_.emplace(rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH}));
    session_.emplace(*lib_);
    ASSERT_EQ(fn().hsa_iterate_agents(
                  [](rocr_agent a, void* d) {
                    static_cast<std::vector<rocr_agent>*>(d)->push_back(a);
                    return rc::status::success;
                  },
                  &agents_),
              rc::status::success);
    ASSERT_EQ(agents_.size(), 8u);  // capture order: 4 CPUs (nodes 0-3), 4 GPUs (nodes 4-7)
    for (rocr_agent a : agents_) {
      std::vector<rocr_pool> pools;
      fn().hsa_amd_agent_iterate_memory_pools(
          a,
          [](rocr_pool p, void* d) {
            static_cast<std::vector<rocr_pool>*>(d)->push_back(p);
            return rc::status::success;
          },
          &pools);
      pools_.push_back(pools);
    }
    hip_.emplace(UMEM_HIP_DOUBLE_PATH);
    ASSERT_TRUE(hip_->ok()) << dlerror();
    hip_->reset(1);  // the events-only double's count, whatever a test before set
    ASSERT_EQ(hip_->attach_rocr(UMEM_ROCR_DOUBLE_PATH), 0) << hip_->last_message();
    hip_->reset(1);  // counts from here; the device count stays ROCr's
    umem::test::double_reset(UMEM_ROCR_DOUBLE_PATH);
    started_ = true;
  }
  void TearDown() override {
    if (hip_ && hip_->ok()) hip_->detach_rocr();
  }

  const umem::hsa::rocr_functions& fn() const { return lib_->fn(); }
  std::string rocr_log() const { return umem::test::double_call_log(UMEM_ROCR_DOUBLE_PATH); }
  int rocr_locks() const {
    return umem::test::double_control<int (*)()>(UMEM_ROCR_DOUBLE_PATH, "umem_rocr_double_locks")();
  }
  std::uint32_t rocr_type(const void* p) const {
    umem::hsa::rocr_pointer_info info;
    EXPECT_EQ(fn().hsa_amd_pointer_info(p, &info, nullptr, nullptr, nullptr), rc::status::success);
    return info.type;
  }
  // Locks `h` as umem's ROCr mapper does: to CPU agent 0's fine pool for GPU agent `gpu` (4-7).
  void rocr_lock(const host_pages& h, std::size_t gpu = 4) {
    void* agent_ptr = nullptr;
    ASSERT_EQ(fn().hsa_amd_memory_lock_to_pool(h.base, h.size, &agents_[gpu], 1, pools_[0][0], 0,
                                               &agent_ptr),
              rc::status::success);
  }

  umem::test::temp_dir dir_;
  std::optional<scoped_env> snap_env_, ver_env_;
  std::optional<rocr_library> lib_;
  std::optional<umem::hsa::rocr_session> session_;
  std::vector<rocr_agent> agents_;
  std::vector<std::vector<rocr_pool>> pools_;
  std::optional<mapped_hip_double> hip_;  // detached before the session closes
  bool started_ = false;
};

// Each rule twice: XNACK off (the capture) and XNACK claimed on.
class HipDoubleXnack : public HipDouble, public ::testing::WithParamInterface<bool> {};
INSTANTIATE_TEST_SUITE_P(Xnack, HipDoubleXnack, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "On" : "Off"; });

TEST_F(HipDouble, AttachedItServesOneDevicePerGpuAgentAndDetachRestoresTheEventsOnlyDouble) {
  const scoped_env none("UMEM_HIP_DOUBLE_ROCR", std::nullopt);
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  EXPECT_EQ(hip_->device_count(), 4);
  hip_->reset(2);  // attached: ROCr's count stays
  EXPECT_EQ(hip_->device_count(), 4);
  EXPECT_EQ(hip_->set_device(3), kSuccess);
  EXPECT_EQ(hip_->attach_rocr(UMEM_ROCR_DOUBLE_PATH), -1);
  EXPECT_TRUE(contains(hip_->last_message(), "already attached")) << hip_->last_message();
  hip_->detach_rocr();
  EXPECT_EQ(hip_->device_count(), 1);
  void* p = nullptr;
  EXPECT_EQ(hip_->malloc(&p, 64), kNoDevice);
  EXPECT_EQ(hip_->attach_rocr("/no/such/libhsa-runtime64.so"), -1);
  EXPECT_TRUE(contains(hip_->last_message(), "cannot map /no/such/libhsa-runtime64.so"))
      << hip_->last_message();
  hip_->set_device(0);
}

TEST(HipDoubleUnattached, MemoryEntryPointsAnswerNoDeviceUnlessTheEnvironmentNamesARocr) {
  const mapped_hip_double hip(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(hip.ok()) << dlerror();
  const scoped_env none("UMEM_HIP_DOUBLE_ROCR", std::nullopt);
  hip.reset(1);
  void* p = nullptr;
  std::vector<char> host(64);
  EXPECT_EQ(hip.malloc(&p, 64), kNoDevice);
  EXPECT_EQ(hip.host_register(host.data(), host.size()), kNoDevice);
  EXPECT_EQ(hip.memset(host.data(), 0, host.size()), kNoDevice);
  EXPECT_EQ(hip.known(host.data()), 0);
  EXPECT_EQ(hip.attempts("hipMalloc"), 1);
  EXPECT_EQ(hip.total_attempts(), 3);
  EXPECT_EQ(hip.device_count(), 1);  // the events-only double, as before
}

TEST(HipDoubleUnattached, UmemHipDoubleRocrAttachesOnTheFirstMemoryCall) {
  UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
  umem::test::temp_dir dir;
  const scoped_env snap("UMEM_ROCR_DOUBLE_SNAPSHOT",
                        umem::test::write_snapshot(dir, umem::test::import_capture(capture))
                            .string());
  const scoped_env rocr("UMEM_HIP_DOUBLE_ROCR", UMEM_ROCR_DOUBLE_PATH);
  const mapped_hip_double hip(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(hip.ok()) << dlerror();
  void* p = nullptr;
  ASSERT_EQ(hip.malloc(&p, 4096), kSuccess);
  EXPECT_EQ(hip.device_count(), 4);
  EXPECT_EQ(hip.known(p), 1);
  EXPECT_EQ(hip.free(p), kSuccess);
  hip.detach_rocr();
}

// hsa_amd_memory_lock_to_pool alone: ROCr says LOCKED, which clr's IsValidAllocation refuses.
TEST_P(HipDoubleXnack, MemoryLockedThroughRocrAloneIsUnknownToHip) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam()));
  if (!started_) return;
  host_pages a(8192), b(8192);
  ASSERT_NO_FATAL_FAILURE(rocr_lock(a));
  ASSERT_NO_FATAL_FAILURE(rocr_lock(b));
  EXPECT_EQ(rocr_type(a.base), rc::pointer_type::locked);
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->memset(a.base, 0x5a, a.size), kInvalidValue);
  EXPECT_EQ(hip_->memset_async(a.base, 0x5a, a.size, nullptr), kInvalidValue);
  std::memset(a.base, 0x33, a.size);
  const int d2d = hip_->memcpy(b.base, a.base, a.size, umem::test::hip_device_to_device);
  if (GetParam()) {
    // hmmCpuMemoryAccessible: both sides unknown, stream.finish() and a CPU memcpy.
    EXPECT_EQ(d2d, kSuccess);
    EXPECT_EQ(b.base[a.size - 1], 0x33);
    EXPECT_EQ(hip_->cpu_copies(), 1);
  } else {
    EXPECT_EQ(d2d, kInvalidValue);  // IsHtoHMemcpyValid
    EXPECT_EQ(hip_->cpu_copies(), 0);
  }
  EXPECT_EQ(hip_->memcpy_async(b.base, a.base, a.size, umem::test::hip_host_to_device, nullptr),
            GetParam() ? kSuccess : kInvalidValue);
  // HostToHost and Default are always allowed, on the CPU.
  const long before = hip_->cpu_copies();
  EXPECT_EQ(hip_->memcpy(b.base, a.base, 100, umem::test::hip_host_to_host), kSuccess);
  EXPECT_EQ(hip_->memcpy(b.base, a.base, 100, umem::test::hip_memcpy_default), kSuccess);
  EXPECT_EQ(hip_->cpu_copies(), before + 2);
  umem::test::hip_pointer_attributes attr;
  ASSERT_EQ(hip_->pointer_attributes(&attr, a.base + 10), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_unregistered);
  EXPECT_EQ(attr.device, -2);  // hipInvalidDeviceId
  EXPECT_EQ(attr.device_pointer, nullptr);
  EXPECT_EQ(attr.host_pointer, nullptr);
  void* dev = nullptr;
  EXPECT_EQ(hip_->host_get_device_pointer(&dev, a.base), kInvalidValue);
  void* base = nullptr;
  std::size_t size = 0;
  EXPECT_EQ(hip_->mem_get_address_range(&base, &size, a.base), kNotFound);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(a.base), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(b.base), rc::status::success);
}

TEST_P(HipDoubleXnack, PlainMallocMemoryIsUnknownToHip) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam()));
  if (!started_) return;
  std::vector<unsigned char> a(4096, 7), b(4096, 0);
  EXPECT_EQ(hip_->known(a.data()), 0);
  EXPECT_EQ(hip_->memset(a.data(), 1, a.size()), kInvalidValue);
  EXPECT_EQ(hip_->memcpy(b.data(), a.data(), a.size(), umem::test::hip_device_to_device),
            GetParam() ? kSuccess : kInvalidValue);
  EXPECT_EQ(b[4095], GetParam() ? 7 : 0);
  EXPECT_EQ(hip_->cpu_copies(), GetParam() ? 1 : 0);
}

// hipHostRegister: clr locks the range once per device with that device's agent, then HIP knows
// it: fills write, every copy kind copies (on the GPU's paths, not the CPU's), attributes say host
// memory with a device pointer.
TEST_P(HipDoubleXnack, RegisteredMemoryIsKnownAndLockedOncePerGpuAgent) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam()));
  if (!started_) return;
  host_pages a(3 * 4096), b(3 * 4096);
  ASSERT_EQ(hip_->set_device(2), kSuccess);
  ASSERT_EQ(hip_->host_register(a.base, a.size, 0x2 /* hipHostRegisterMapped */), kSuccess);
  ASSERT_EQ(hip_->host_register(b.base, b.size), kSuccess);
  hip_->set_device(0);
  const auto locks = lines_with(rocr_log(), "memory_lock_to_pool");
  ASSERT_EQ(locks.size(), 8u) << rocr_log();
  // Device i's agent, to SystemSegment(): over the ROCr double, which answers no link distance,
  // clr's setupCpuAgent keeps CPU agent 0, whose fine pool (the first FINE GRAINED one) is 0.
  for (std::size_t i = 0; i < 8; ++i) {
    const std::string count = i % 4 == 0 ? "" : " count=" + std::to_string(i % 4 + 1);
    EXPECT_TRUE(std::regex_match(
        locks[i], std::regex("memory_lock_to_pool size=12288 pool=node0/0 flags=0 agents=node" +
                             std::to_string(4 + i % 4) + " -> SUCCESS l[0-9]+" + count)))
        << locks[i];
  }
  EXPECT_EQ(hip_->known(a.base), 1);
  EXPECT_EQ(hip_->known(a.base + a.size - 1), 1);
  EXPECT_EQ(hip_->known(a.base + a.size), 0);
  EXPECT_EQ(hip_->live_registrations(), 2);

  ASSERT_EQ(hip_->memset(a.base, 0x5a, a.size), kSuccess);
  EXPECT_EQ(a.base[a.size - 1], 0x5a);
  ASSERT_EQ(hip_->memset_async(a.base + 4096, 0x11, 4096, reinterpret_cast<void*>(0xA000)),
            kSuccess);
  EXPECT_EQ(a.base[8191], 0x11);
  EXPECT_EQ(hip_->memset(a.base + 1, 0, a.size), kInvalidValue);  // past the object's end
  for (int kind : {0, 1, 2, 3, 4}) {
    SCOPED_TRACE(kind);
    std::memset(b.base, 0, b.size);
    ASSERT_EQ(hip_->memcpy(b.base, a.base, a.size, kind), kSuccess);
    EXPECT_EQ(std::memcmp(a.base, b.base, a.size), 0);
  }
  std::vector<unsigned char> pageable(4096, 0x77);
  ASSERT_EQ(hip_->memcpy_async(a.base, pageable.data(), pageable.size(),
                               umem::test::hip_host_to_device, nullptr),
            kSuccess);
  EXPECT_EQ(a.base[4095], 0x77);
  EXPECT_EQ(hip_->cpu_copies(), 0);

  umem::test::hip_pointer_attributes attr;
  ASSERT_EQ(hip_->pointer_attributes(&attr, a.base + 100), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_host);
  EXPECT_EQ(attr.device_pointer, a.base + 100);
  EXPECT_EQ(attr.host_pointer, a.base + 100);
  EXPECT_EQ(attr.device, 2);  // the registering thread's device
  EXPECT_EQ(attr.is_managed, 0);
  EXPECT_EQ(attr.allocation_flags, 2u);
  void* dev = nullptr;
  ASSERT_EQ(hip_->host_get_device_pointer(&dev, a.base + 8), kSuccess);
  EXPECT_EQ(dev, a.base + 8);
  EXPECT_EQ(hip_->host_get_device_pointer(&dev, a.base, 1), kInvalidValue);  // flags must be 0
  void* base = reinterpret_cast<void*>(1);
  std::size_t size = 0;
  ASSERT_EQ(hip_->mem_get_address_range(&base, &size, a.base + 5), kSuccess);
  EXPECT_EQ(base, nullptr);  // a hipHostRegister buffer has no SVM pointer
  EXPECT_EQ(size, a.size);
  EXPECT_EQ(hip_->host_free(a.base), kInvalidValue);  // not an SVM allocation

  umem::test::double_reset(UMEM_ROCR_DOUBLE_PATH);
  ASSERT_EQ(hip_->host_unregister(a.base), kSuccess);
  ASSERT_EQ(hip_->host_unregister(b.base), kSuccess);
  EXPECT_EQ(lines_with(rocr_log(), "memory_unlock").size(), 8u) << rocr_log();
  EXPECT_EQ(rocr_locks(), 0);
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->live_registrations(), 0);
  EXPECT_EQ(hip_->memset(a.base, 0, 16), kInvalidValue);
  EXPECT_EQ(hip_->host_unregister(a.base), kNotRegistered);
}

TEST_P(HipDoubleXnack, HipAllocationsAreKnown) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam()));
  if (!started_) return;
  void *dev = nullptr, *host = nullptr, *managed = nullptr;
  ASSERT_EQ(hip_->set_device(1), kSuccess);
  ASSERT_EQ(hip_->malloc(&dev, 8192), kSuccess);
  hip_->set_device(0);
  ASSERT_EQ(hip_->host_malloc(&host, 8192, 0x2 /* hipHostMallocMapped */), kSuccess);
  ASSERT_EQ(hip_->malloc_managed(&managed, 8192), kSuccess);
  const std::string log = rocr_log();
  EXPECT_TRUE(contains(log, "pool_allocate node5 pool=0 size=8192 flags=0 -> SUCCESS")) << log;
  // hipHostMalloc: SystemSegment(), then access for every GPU agent (clr hostAlloc).
  EXPECT_TRUE(contains(log, "pool_allocate node0 pool=0 size=8192 flags=0 -> SUCCESS")) << log;
  EXPECT_TRUE(contains(log, "agents=node4,node5,node6,node7 flags=null -> SUCCESS")) << log;
  // hipMallocManaged without HMM: hostAlloc(kNoAtomics), the system coarse pool.
  EXPECT_TRUE(contains(log, "pool_allocate node0 pool=3 size=8192 flags=0 -> SUCCESS")) << log;

  for (void* p : {dev, host, managed}) {
    EXPECT_EQ(hip_->known(p), 1);
    EXPECT_EQ(hip_->memset(p, 3, 8192), kSuccess);
    EXPECT_EQ(static_cast<unsigned char*>(p)[8191], 3);
  }
  ASSERT_EQ(hip_->memcpy(host, dev, 8192, umem::test::hip_device_to_host), kSuccess);
  umem::test::hip_pointer_attributes attr;
  ASSERT_EQ(hip_->pointer_attributes(&attr, static_cast<char*>(dev) + 1), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_device);
  EXPECT_EQ(attr.device, 1);
  EXPECT_EQ(attr.device_pointer, static_cast<char*>(dev) + 1);
  EXPECT_EQ(attr.host_pointer, nullptr);
  ASSERT_EQ(hip_->pointer_attributes(&attr, host), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_host);
  EXPECT_EQ(attr.host_pointer, host);
  EXPECT_EQ(attr.allocation_flags, 2u);
  ASSERT_EQ(hip_->pointer_attributes(&attr, managed), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_managed);
  EXPECT_EQ(attr.is_managed, 1);
  void* base = nullptr;
  std::size_t size = 0;
  ASSERT_EQ(hip_->mem_get_address_range(&base, &size, static_cast<char*>(dev) + 4000), kSuccess);
  EXPECT_EQ(base, dev);
  EXPECT_EQ(size, 8192u);

  // clr's own rules for the allocation calls.
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(hip_->malloc(&p, 0), kSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(hip_->malloc(nullptr, 64), kInvalidValue);
  EXPECT_EQ(hip_->malloc_managed(&p, 0), kInvalidValue);
  EXPECT_EQ(hip_->malloc_managed(&p, 64, 4 /* hipMemAttachSingle */), kInvalidValue);
  EXPECT_EQ(hip_->host_alloc(&p, 64, 0x10000000 /* hipHostAllocUncached */), kInvalidValue);
  EXPECT_EQ(hip_->host_malloc(&p, 64, 0xC0000000 /* Coherent | NonCoherent */), kInvalidValue);
  EXPECT_EQ(hip_->malloc(&p, std::size_t{1} << 62), kOutOfMemory);

  // hipFree of an interior pointer frees the whole allocation (svmFree removes getSvmPtr()).
  EXPECT_EQ(hip_->free(static_cast<char*>(dev) + 100), kSuccess);
  EXPECT_EQ(hip_->known(dev), 0);
  EXPECT_EQ(hip_->free(dev), kInvalidValue);
  EXPECT_EQ(hip_->host_free(host), kSuccess);
  EXPECT_EQ(hip_->free(managed), kSuccess);
  EXPECT_EQ(hip_->free(nullptr), kSuccess);
  EXPECT_EQ(lines_with(rocr_log(), "pool_free").size(), 3u) << rocr_log();
}

// ROCr pool memory HIP did not allocate: clr's GetArenaMemObj takes it as device memory with no
// size bound.
TEST_P(HipDoubleXnack, RocrPoolMemoryIsKnownThroughTheArena) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam()));
  if (!started_) return;
  void* p = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][0], 8192, 0, &p), rc::status::success);
  auto* bytes = static_cast<unsigned char*>(p);
  EXPECT_EQ(hip_->known(bytes + 100), 2);
  EXPECT_EQ(hip_->memset(bytes + 100, 9, 8000), kSuccess);
  EXPECT_EQ(bytes[8099], 9);
  std::vector<unsigned char> back(64);
  EXPECT_EQ(hip_->memcpy(back.data(), bytes + 100, back.size(), umem::test::hip_device_to_host),
            kSuccess);
  EXPECT_EQ(back[63], 9);
  umem::test::hip_pointer_attributes attr;
  ASSERT_EQ(hip_->pointer_attributes(&attr, bytes + 100), kSuccess);
  EXPECT_EQ(attr.type, umem::test::hip_memory_device);
  EXPECT_EQ(attr.device_pointer, bytes + 100);
  EXPECT_EQ(attr.device, 0);
  void* base = nullptr;
  std::size_t size = 0;
  ASSERT_EQ(hip_->mem_get_address_range(&base, &size, p), kSuccess);
  EXPECT_EQ(base, reinterpret_cast<void*>(0x100));  // amd::ArenaMemory's base
  EXPECT_EQ(size, std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(hip_->free(p), kSuccess);  // frees nothing: the arena is not in HIP's map
  EXPECT_EQ(hip_->known(p), 2);
  EXPECT_EQ(fn().hsa_amd_memory_pool_free(p), rc::status::success);
  EXPECT_EQ(hip_->known(p), 0);
}

// clr's AddMemObj keeps the first object of a key; the second registration succeeds, and neither
// it nor its locks are ever released.
TEST_F(HipDouble, RegisteringABaseTwiceSucceedsAndLeaksTheSecondRegistration) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(4096);
  ASSERT_EQ(hip_->host_register(a.base, a.size), kSuccess);
  ASSERT_EQ(hip_->host_register(a.base, a.size), kSuccess);
  EXPECT_EQ(hip_->leaked_registrations(), 1);
  EXPECT_EQ(hip_->live_registrations(), 1);
  EXPECT_TRUE(contains(rocr_log(), "agents=node7 -> SUCCESS l")) << rocr_log();
  EXPECT_TRUE(contains(rocr_log(), " count=8\n")) << rocr_log();
  ASSERT_EQ(hip_->host_unregister(a.base), kSuccess);
  // The first object's four locks went; the leaked one's four stay: ROCr still says LOCKED, and
  // HIP, whose map no longer has the base, refuses the memory.
  EXPECT_EQ(rocr_locks(), 4);
  EXPECT_EQ(rocr_type(a.base), rc::pointer_type::locked);
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->memset(a.base, 0, 16), kInvalidValue);
  EXPECT_EQ(hip_->host_unregister(a.base), kNotRegistered);
  // A range overlapping a registration without being it: the ROCr double refuses the lock (stricter
  // than ROCr), so HIP answers as for any failed lock.
  EXPECT_EQ(hip_->host_register(a.base, 2048), kInvalidValue);
}

TEST_F(HipDouble, UnregisteringWhatHipDoesNotKnowIsNotRegistered) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(4096);
  EXPECT_EQ(hip_->host_unregister(a.base), kNotRegistered);
  EXPECT_EQ(hip_->host_unregister(nullptr), kInvalidValue);
  EXPECT_EQ(hip_->attempts("hipHostUnregister"), 2);
  EXPECT_EQ(hip_->total_attempts(), 2);
}

using HipDoubleDeathTest = HipDouble;

// clr's ihipHostUnregister finds the object of an interior pointer, then RemoveMemObj(hostPtr)
// fails its guarantee: the process aborts.
TEST_F(HipDoubleDeathTest, UnregisteringAnInteriorPointerAbortsAsClrDoes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(8192);
  ASSERT_EQ(hip_->host_register(a.base, a.size), kSuccess);
  EXPECT_DEATH(hip_->host_unregister(a.base + 4096),
               "hipHostUnregister.*RemoveMemObj.*Memobj map does not have ptr");
  void* p = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][0], 4096, 0, &p), rc::status::success);
  EXPECT_DEATH(hip_->host_unregister(p), "Memobj map does not have ptr");  // the arena
  EXPECT_DEATH(hip_->free(a.base), "hipFree.*Memobj map does not have ptr");  // no SVM pointer
  EXPECT_EQ(hip_->host_unregister(a.base), kSuccess);
}

TEST_F(HipDouble, FailNextAnswersForHostRegisterAndLocksNothing) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(4096);
  hip_->fail_next("hipHostRegister", kOutOfMemory);
  EXPECT_EQ(hip_->host_register(a.base, a.size), kOutOfMemory);
  EXPECT_TRUE(lines_with(rocr_log(), "memory_lock").empty()) << rocr_log();
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->attempts("hipHostRegister"), 1);
  EXPECT_EQ(hip_->calls("hipHostRegister"), 0);
  ASSERT_EQ(hip_->host_register(a.base, a.size), kSuccess);
  EXPECT_EQ(hip_->calls("hipHostRegister"), 1);
  for (const char* call : {"hipMalloc", "hipMemset", "hipMemcpyAsync", "hipPointerGetAttributes",
                           "hipHostUnregister"})
    hip_->fail_next(call, 999);
  void* p = nullptr;
  umem::test::hip_pointer_attributes attr;
  EXPECT_EQ(hip_->malloc(&p, 64), 999);
  EXPECT_EQ(hip_->memset(a.base, 0, 16), 999);
  EXPECT_EQ(hip_->memcpy_async(a.base, a.base, 16, 0, nullptr), 999);
  EXPECT_EQ(hip_->pointer_attributes(&attr, a.base), 999);
  EXPECT_EQ(hip_->host_unregister(a.base), 999);
  EXPECT_EQ(hip_->known(a.base), 1);
  EXPECT_EQ(hip_->host_unregister(a.base), kSuccess);
}

// A lock failing on the third device fails the buffer's create: clr releases it, which unlocks the
// two locks taken, and answers hipErrorInvalidValue.
TEST_F(HipDouble, AFailedLockUndoesTheLocksTakenAndIsInvalidValue) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(4096);
  umem::test::double_control<void (*)(std::uint64_t, int)>(UMEM_ROCR_DOUBLE_PATH,
                                                          "umem_rocr_double_fail_call")(3, 0);
  EXPECT_EQ(hip_->host_register(a.base, a.size), kInvalidValue);
  const std::string log = rocr_log();
  EXPECT_EQ(lines_with(log, "memory_lock_to_pool size=").size(), 3u) << log;
  EXPECT_EQ(lines_with(log, "-> SUCCESS l").size(), 2u) << log;
  EXPECT_EQ(lines_with(log, "OUT_OF_RESOURCES").size(), 2u) << log;  // the injection and the lock
  EXPECT_EQ(lines_with(log, "memory_unlock l").size(), 2u) << log;
  EXPECT_EQ(rocr_locks(), 0);
  EXPECT_EQ(hip_->known(a.base), 0);
  EXPECT_EQ(hip_->live_registrations(), 0);
}

TEST_F(HipDouble, CopiesAndFillsValidateInClrsOrder) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  host_pages a(4096), b(4096);
  ASSERT_EQ(hip_->host_register(a.base, a.size), kSuccess);
  // Size 0 first: nothing else is looked at.
  EXPECT_EQ(hip_->memcpy(nullptr, nullptr, 0, 99), kSuccess);
  EXPECT_EQ(hip_->memset(nullptr, 0, 0), kSuccess);
  EXPECT_EQ(hip_->memcpy(nullptr, a.base, 16, 99), kInvalidValue);  // null before the kind
  EXPECT_EQ(hip_->memcpy(b.base, a.base, 16, 5), kInvalidMemcpyDirection);
  EXPECT_EQ(hip_->memcpy(b.base, a.base, 16, -1), kInvalidMemcpyDirection);
  // hipMemcpyAsync checks the kind before the size.
  EXPECT_EQ(hip_->memcpy_async(nullptr, nullptr, 0, 99, nullptr), kInvalidMemcpyDirection);
  EXPECT_EQ(hip_->memcpy(b.base, a.base, 16, 1024 /* DeviceToDeviceNoCU */), kSuccess);
  // Each known side must hold the whole copy.
  EXPECT_EQ(hip_->memcpy(b.base, a.base + 1, a.size, 2), kInvalidValue);
  EXPECT_EQ(hip_->memcpy(a.base + 1, b.base, a.size, 1), kInvalidValue);
  EXPECT_EQ(hip_->memset(a.base + 4095, 0, 2), kInvalidValue);
  EXPECT_EQ(hip_->memset(a.base + 4095, 0, 1), kSuccess);
  umem::test::hip_pointer_attributes attr;
  EXPECT_EQ(hip_->pointer_attributes(&attr, nullptr), kInvalidValue);
  EXPECT_EQ(hip_->pointer_attributes(nullptr, a.base), kInvalidValue);
  EXPECT_EQ(hip_->attempts("hipMemcpy"), 7);
  EXPECT_EQ(hip_->calls("hipMemcpy"), 2);
  EXPECT_EQ(hip_->host_unregister(a.base), kSuccess);
}

TEST_F(HipDouble, SynchronisationCompletesTheStreamsEvents) {
  ASSERT_NO_FATAL_FAILURE(start(false));
  if (!started_) return;
  using create_fn = int (*)(void**, unsigned);
  using record_fn = int (*)(void*, void*);
  using query_fn = int (*)(void*);
  void* stream = reinterpret_cast<void*>(0xA000);
  void *e1 = nullptr, *e2 = nullptr;
  ASSERT_EQ(hip_->get<create_fn>("hipEventCreateWithFlags")(&e1, 0), kSuccess);
  ASSERT_EQ(hip_->get<create_fn>("hipEventCreateWithFlags")(&e2, 0), kSuccess);
  hip_->pending(stream);
  ASSERT_EQ(hip_->get<record_fn>("hipEventRecord")(e1, stream), kSuccess);
  EXPECT_EQ(hip_->get<query_fn>("hipEventQuery")(e1), 600);
  EXPECT_EQ(hip_->stream_synchronize(stream), kSuccess);
  EXPECT_EQ(hip_->get<query_fn>("hipEventQuery")(e1), kSuccess);
  hip_->pending(stream);
  ASSERT_EQ(hip_->get<record_fn>("hipEventRecord")(e2, stream), kSuccess);
  EXPECT_EQ(hip_->device_synchronize(), kSuccess);
  EXPECT_EQ(hip_->get<query_fn>("hipEventQuery")(e2), kSuccess);
  EXPECT_EQ(hip_->total_attempts(), 2 + 2 + 3 + 2);  // creates, records, queries, the two syncs
  for (void* e : {e1, e2}) hip_->get<query_fn>("hipEventDestroy")(e);
}

}  // namespace
