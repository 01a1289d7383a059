// The ROCr double as a call checker: it rejects what ROCr rejects and logs every memory call, so
// the allocator's tests can assert on the calls it made.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "rocr_test_env.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"

namespace {

using namespace umem::hsa;
namespace rc = umem::hsa::rocr_compat;
using umem::test::scoped_env;

// A session on the double serving the 4-socket MI300A capture, with agents and pools listed.
class RocrDouble : public ::testing::Test {
 protected:
  void open(const char* double_path, const char* version) {
    UMEM_REQUIRE_FIXTURE(capture, umem::test::kMi300aRocminfo);
    snapshot_ = umem::test::write_snapshot(dir_, umem::test::import_capture(capture));
    snap_env_.emplace("UMEM_ROCR_DOUBLE_SNAPSHOT", snapshot_.string());
    ver_env_.emplace("UMEM_ROCR_DOUBLE_VERSION", version);
    path_ = double_path;
    lib_.emplace(rocr_library::load_from(std::vector<std::string>{double_path}));
    umem::test::double_reset(double_path);
    session_.emplace(*lib_);
    lib_->check(fn().hsa_iterate_agents(
                    [](rocr_agent a, void* d) {
                      static_cast<std::vector<rocr_agent>*>(d)->push_back(a);
                      return rc::status::success;
                    },
                    &agents_),
                "hsa_iterate_agents");
    for (rocr_agent a : agents_) {
      std::vector<rocr_pool> pools;
      lib_->check(fn().hsa_amd_agent_iterate_memory_pools(
                      a,
                      [](rocr_pool p, void* d) {
                        static_cast<std::vector<rocr_pool>*>(d)->push_back(p);
                        return rc::status::success;
                      },
                      &pools),
                  "hsa_amd_agent_iterate_memory_pools");
      pools_.push_back(pools);
    }
  }
  const rocr_functions& fn() const { return lib_->fn(); }
  std::string log() const { return umem::test::double_call_log(path_); }

  umem::test::temp_dir dir_;
  std::filesystem::path snapshot_;
  std::optional<scoped_env> snap_env_, ver_env_;
  const char* path_ = nullptr;
  std::optional<rocr_library> lib_;
  std::optional<rocr_session> session_;
  std::vector<rocr_agent> agents_;             // capture order: 4 CPUs (nodes 0-3), 4 GPUs
  std::vector<std::vector<rocr_pool>> pools_;  // per agent, capture order
};

TEST_F(RocrDouble, AllocateAllowAccessFreeAreCheckedAndLogged) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;  // skipped: capture missing
  ASSERT_EQ(agents_.size(), 8u);
  const rocr_pool gpu_coarse = pools_[4][0];  // agent 5 (node 4), pool 1 COARSE
  void* p = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_pool_allocate(gpu_coarse, 4096, 0, &p), rc::status::success);
  ASSERT_NE(p, nullptr);
  static_cast<char*>(p)[4095] = 1;  // host-accessible, as on an APU

  const std::uint32_t flags = 0;
  EXPECT_EQ(fn().hsa_amd_agents_allow_access(1, &agents_[0], &flags, p),
            rc::status::invalid_argument);  // flags must be NULL
  EXPECT_EQ(fn().hsa_amd_agents_allow_access(1, &agents_[0], nullptr, p), rc::status::success);
  const rocr_agent bogus{0x1234};
  EXPECT_EQ(fn().hsa_amd_agents_allow_access(1, &bogus, nullptr, p), rc::status::invalid_agent);

  EXPECT_EQ(fn().hsa_amd_memory_pool_free(p), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_pool_free(p), rc::status::invalid_allocation);  // double free

  const std::string l = log();
  EXPECT_NE(l.find("pool_allocate node4 pool=0 size=4096 flags=0 -> SUCCESS a1\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("allow_access a1 agents=node0 flags=non-null -> INVALID_ARGUMENT\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("allow_access a1 agents=node0 flags=null -> SUCCESS\n"), std::string::npos) << l;
  EXPECT_NE(l.find("allow_access a1 agents=invalid flags=null -> INVALID_AGENT\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("pool_free a1 -> SUCCESS\n"), std::string::npos) << l;
  EXPECT_NE(l.find("pool_free host -> INVALID_ALLOCATION\n"), std::string::npos) << l;
}

TEST_F(RocrDouble, RejectsBadPoolsAndUnallocatableSegments) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  void* p = nullptr;
  EXPECT_EQ(fn().hsa_amd_memory_pool_allocate(rocr_pool{42}, 4096, 0, &p),
            rc::status::invalid_memory_pool);
  // Agent 5's pool 4 is the GROUP segment, "Allocatable: FALSE" (capture line 357).
  EXPECT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][3], 64, 0, &p),
            rc::status::invalid_allocation);
  EXPECT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][0], 0, 0, &p),
            rc::status::invalid_argument);
  // More than the pool's 98647808 KB (capture line 334) cannot be served.
  EXPECT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][0], 98647808ull * 1024 + 4096, 0, &p),
            rc::status::out_of_resources);
}

TEST_F(RocrDouble, LockUnlockAndPointerInfo) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  std::vector<char> host(8192);
  void* agent_ptr = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_lock(host.data(), host.size(), &agents_[4], 1, &agent_ptr),
            rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_lock(host.data(), 4096, nullptr, 0, &agent_ptr),
            rc::status::invalid_argument);  // already locked
  rocr_pointer_info info;
  ASSERT_EQ(fn().hsa_amd_pointer_info(host.data() + 100, &info, nullptr, nullptr, nullptr),
            rc::status::success);
  EXPECT_EQ(info.type, rc::pointer_type::locked);
  EXPECT_EQ(info.host_base_address, host.data());
  EXPECT_EQ(info.size_in_bytes, host.size());
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::invalid_argument);
  ASSERT_EQ(fn().hsa_amd_pointer_info(host.data(), &info, nullptr, nullptr, nullptr),
            rc::status::success);
  EXPECT_EQ(info.type, rc::pointer_type::unknown);

  // lock_to_pool needs a CPU agent's pool and flags 0.
  EXPECT_EQ(
      fn().hsa_amd_memory_lock_to_pool(host.data(), 4096, nullptr, 0, pools_[4][0], 0, &agent_ptr),
      rc::status::invalid_memory_pool);
  EXPECT_EQ(
      fn().hsa_amd_memory_lock_to_pool(host.data(), 4096, nullptr, 0, pools_[0][0], 1, &agent_ptr),
      rc::status::invalid_argument);
  EXPECT_EQ(
      fn().hsa_amd_memory_lock_to_pool(host.data(), 4096, nullptr, 0, pools_[0][0], 0, &agent_ptr),
      rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::success);
  const std::string l = log();
  EXPECT_NE(l.find("memory_lock size=8192 agents=node4 -> SUCCESS l1\n"), std::string::npos) << l;
  EXPECT_NE(l.find("memory_unlock l1 -> SUCCESS\n"), std::string::npos) << l;
}

// KFD pins only writable pages of a wholly mapped range (Note [What a lock pins] in the double's
// double_memory.cpp); ROCr's Lock answers HSA_STATUS_ERROR when the registration fails.
TEST_F(RocrDouble, LockRefusesReadOnlyAndUnmappedPages) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  auto* map = static_cast<char*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(map, MAP_FAILED);
  void* agent_ptr = nullptr;
  ASSERT_EQ(mprotect(map + page, page, PROT_READ), 0);
  EXPECT_EQ(fn().hsa_amd_memory_lock(map, 3 * page, &agents_[4], 1, &agent_ptr),
            rc::status::error);
  EXPECT_EQ(fn().hsa_amd_memory_lock(map + page + 8, 16, &agents_[4], 1, &agent_ptr),
            rc::status::error);
  ASSERT_EQ(munmap(map + page, page), 0);  // a hole between two writable pages
  EXPECT_EQ(fn().hsa_amd_memory_lock(map, 3 * page, &agents_[4], 1, &agent_ptr),
            rc::status::error);
  // Each writable page alone (an unaligned range inside it too) locks.
  ASSERT_EQ(fn().hsa_amd_memory_lock(map + 2 * page + 8, 100, &agents_[4], 1, &agent_ptr),
            rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(map + 2 * page + 8), rc::status::success);
  const std::string l = log();
  EXPECT_NE(l.find("-> ERROR (read-only pages"), std::string::npos) << l;
  EXPECT_NE(l.find("-> ERROR (pages not mapped"), std::string::npos) << l;
  munmap(map, page);
  munmap(map + 2 * page, page);
}

// libhsakmt counts registrations of the same (address, size) (fmm.c registration_count): HIP locks
// a hipHostRegister range once per device, so the double counts too, and shows it in the log.
TEST_F(RocrDouble, LockingTheSameRangeAgainCountsAndAddsTheAgents) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  std::vector<char> host(8192);
  void* agent_ptr = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_lock_to_pool(host.data(), host.size(), &agents_[4], 1,
                                             pools_[0][0], 0, &agent_ptr),
            rc::status::success);
  ASSERT_EQ(fn().hsa_amd_memory_lock_to_pool(host.data(), host.size(), &agents_[5], 1,
                                             pools_[0][0], 0, &agent_ptr),
            rc::status::success);
  EXPECT_EQ(agent_ptr, host.data());
  auto locks = umem::test::double_control<int (*)()>(path_, "umem_rocr_double_locks");
  auto locked_bytes =
      umem::test::double_control<std::uint64_t (*)()>(path_, "umem_rocr_double_locked_bytes");
  EXPECT_EQ(locks(), 2);
  EXPECT_EQ(locked_bytes(), 8192u);
  rocr_pointer_info info;
  std::uint32_t n = 0;
  rocr_agent* accessible = nullptr;
  ASSERT_EQ(fn().hsa_amd_pointer_info(host.data(), &info, std::malloc, &n, &accessible),
            rc::status::success);
  EXPECT_EQ(info.type, rc::pointer_type::locked);
  ASSERT_EQ(n, 2u);  // the agents of both locks
  EXPECT_EQ(accessible[0].handle, agents_[4].handle);
  EXPECT_EQ(accessible[1].handle, agents_[5].handle);
  std::free(accessible);
  // A range that overlaps without being the same stays refused (stricter than ROCr).
  EXPECT_EQ(fn().hsa_amd_memory_lock_to_pool(host.data() + 4096, 4096, &agents_[4], 1,
                                             pools_[0][0], 0, &agent_ptr),
            rc::status::invalid_argument);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::success);
  ASSERT_EQ(fn().hsa_amd_pointer_info(host.data(), &info, nullptr, nullptr, nullptr),
            rc::status::success);
  EXPECT_EQ(info.type, rc::pointer_type::locked);  // until the last unlock
  EXPECT_EQ(locks(), 1);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::success);
  ASSERT_EQ(fn().hsa_amd_pointer_info(host.data(), &info, nullptr, nullptr, nullptr),
            rc::status::success);
  EXPECT_EQ(info.type, rc::pointer_type::unknown);
  EXPECT_EQ(fn().hsa_amd_memory_unlock(host.data()), rc::status::invalid_argument);
  EXPECT_EQ(locks(), 0);

  ASSERT_EQ(fn().hsa_amd_memory_lock(host.data(), host.size(), nullptr, 0, &agent_ptr),
            rc::status::success);
  ASSERT_EQ(fn().hsa_amd_memory_lock(host.data(), host.size(), &agents_[6], 1, &agent_ptr),
            rc::status::success);
  session_.reset();  // the last hsa_shut_down names the range still locked twice
  const std::string l = log();
  EXPECT_NE(l.find("memory_lock_to_pool size=8192 pool=node0/0 flags=0 agents=node4 -> SUCCESS l1\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("memory_lock_to_pool size=8192 pool=node0/0 flags=0 agents=node5 -> SUCCESS l1 "
                   "count=2\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("memory_unlock l1 -> SUCCESS count=1\n"), std::string::npos) << l;
  EXPECT_NE(l.find("memory_unlock l1 -> SUCCESS\n"), std::string::npos) << l;
  // A range locked for all agents stays locked for all (agents=all covers the second's node6).
  EXPECT_NE(l.find("memory_lock size=8192 agents=node6 -> SUCCESS l2 count=2\n"),
            std::string::npos)
      << l;
  EXPECT_NE(l.find("leak l2 size=8192 count=2\n"), std::string::npos) << l;
}

TEST_F(RocrDouble, SvmAttributesRoundTripAndRejectBadAgents) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  std::vector<char> host(4096);
  rocr_svm_attribute set[] = {{rc::svm_attrib::preferred_location, agents_[4].handle},
                              {rc::svm_attrib::agent_accessible, agents_[4].handle}};
  ASSERT_EQ(fn().hsa_amd_svm_attributes_set(host.data(), host.size(), set, 2), rc::status::success);
  rocr_svm_attribute get[] = {{rc::svm_attrib::preferred_location, 0},
                              {rc::svm_attrib::access_query, agents_[4].handle},
                              {rc::svm_attrib::access_query, agents_[5].handle}};
  ASSERT_EQ(fn().hsa_amd_svm_attributes_get(host.data(), host.size(), get, 3), rc::status::success);
  EXPECT_EQ(get[0].value, agents_[4].handle);
  EXPECT_EQ(get[1].attribute, rc::svm_attrib::agent_accessible);
  EXPECT_EQ(get[2].attribute, rc::svm_attrib::agent_no_access);
  rocr_svm_attribute bad[] = {{rc::svm_attrib::prefetch_location, 7}};
  EXPECT_EQ(fn().hsa_amd_svm_attributes_set(host.data(), host.size(), bad, 1),
            rc::status::invalid_agent);
  const std::string l = log();
  EXPECT_NE(l.find("svm_attributes_set host size=4096 preferred_location=node4 "
                   "agent_accessible=node4 -> SUCCESS\n"),
            std::string::npos)
      << l;
}

TEST_F(RocrDouble, CopyCompletesSignalAndShutDownReportsLeaks) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  void* dst = nullptr;
  ASSERT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[4][0], 64, 0, &dst), rc::status::success);
  const char src[] = "unified";
  rocr_signal done;
  ASSERT_EQ(fn().hsa_signal_create(1, 0, nullptr, &done), rc::status::success);
  ASSERT_EQ(fn().hsa_amd_memory_async_copy(dst, agents_[4], src, agents_[0], sizeof src, 0, nullptr,
                                           done),
            rc::status::success);
  EXPECT_EQ(fn().hsa_signal_wait_scacquire(done, rc::signal_condition::eq, 0, ~0ull,
                                           rc::wait_state::blocked),
            0);
  EXPECT_STREQ(static_cast<const char*>(dst), "unified");
  EXPECT_EQ(fn().hsa_signal_destroy(done), rc::status::success);
  EXPECT_EQ(fn().hsa_signal_destroy(done), rc::status::invalid_signal);
  session_.reset();  // last hsa_shut_down: the allocation was never freed
  EXPECT_NE(log().find("leak a1 size=64\n"), std::string::npos) << log();
}

TEST_F(RocrDouble, Release523RejectsAllocationFlags) {
  open(UMEM_ROCR_DOUBLE_523_PATH, "5.2.3");
  if (!lib_) return;
  void* p = nullptr;
  EXPECT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[0][0], 4096, rc::alloc_flag::pcie, &p),
            rc::status::invalid_argument);
  ASSERT_EQ(fn().hsa_amd_memory_pool_allocate(pools_[0][0], 4096, 0, &p), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_memory_pool_free(p), rc::status::success);
}

TEST_F(RocrDouble, VmemReserveMapAccessInTheFullBuild) {
  open(UMEM_ROCR_DOUBLE_PATH, "7.1");
  if (!lib_) return;
  ASSERT_TRUE(lib_->has_vmem());
  const std::size_t size = 2u << 20;
  void* va = nullptr;
  ASSERT_EQ(fn().hsa_amd_vmem_address_reserve_align(&va, size, 0, size, 0), rc::status::success);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(va) % size, 0u);
  rocr_vmem_handle h;
  ASSERT_EQ(fn().hsa_amd_vmem_handle_create(pools_[4][0], size, 0, 0, &h), rc::status::success);
  ASSERT_EQ(fn().hsa_amd_vmem_map(va, size, 0, h, 0), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_vmem_address_free(va, size), rc::status::invalid_argument);  // mapped
  const rocr_access_desc desc{rc::access_permission::rw, agents_[4]};
  ASSERT_EQ(fn().hsa_amd_vmem_set_access(va, size, &desc, 1), rc::status::success);
  static_cast<char*>(va)[size - 1] = 1;
  std::uint32_t perms = 0;
  ASSERT_EQ(fn().hsa_amd_vmem_get_access(va, &perms, agents_[4]), rc::status::success);
  EXPECT_EQ(perms, rc::access_permission::rw);
  EXPECT_EQ(fn().hsa_amd_vmem_unmap(va, size), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_vmem_handle_release(h), rc::status::success);
  EXPECT_EQ(fn().hsa_amd_vmem_address_free(va, size), rc::status::success);
}

}  // namespace
