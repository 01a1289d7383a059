// A forked child of a process whose allocator maps segments for the GPU (Note [Fork] in
// fork_safety.hpp): the child allocates new segments, small and large, writes, frees, trims and
// frees a block it inherited, making no GPU runtime call. The ROCr double (4-socket MI300A,
// XNACK off and on) and the HIP double refuse every memory call from a forked child, as KFD does,
// so a mapper that called the runtime there would make the child's allocation fail.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "allocator/mi300a_double_fixture.hpp"
#include "hip_runtime/hip_test_env.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/hip_gpu_mapper.hpp"
#include "umem/allocator/placement_resolver.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

namespace umem::alloc::test {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

// Runs `child` in a fork() under a 10 s alarm (a hang fails); what became of it, "" for exit 0.
std::string in_child(const std::function<int()>& child) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return std::string("fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    ::alarm(10);
    int code = 90;
    try {
      code = child();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      code = 91;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return "waitpid failed";
  if (WIFEXITED(status))
    return WEXITSTATUS(status) == 0 ? "" : "exited " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

bool filled_with(const void* p, std::size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  return b[0] == v && b[n / 2] == v && b[n - 1] == v;
}

request on_node0() { return request{parse_placement("node:0"), coherence::coarse}; }

// The child's work: `inherited` (1 MiB of 7s) came from the parent. Allocates sizes that need
// new segments (several small blocks past the parent's cached segment, 5 and 9 MiB), writes and
// frees them, frees `inherited`, trims. 0 on success, else which step failed.
int child_work(allocator& a, void* inherited) {
  if (!filled_with(inherited, kMiB, 7)) return 11;
  std::vector<void*> blocks;
  for (const std::size_t n : {kMiB, kMiB, kMiB, kMiB, 4096 * std::size_t{3}, 5 * kMiB, 9 * kMiB}) {
    void* p = a.allocate(n, on_node0());
    if (p == nullptr) return 12;
    std::memset(p, 0x5a, n);
    if (!filled_with(p, n, 0x5a)) return 13;
    blocks.push_back(p);
  }
  for (void* p : blocks) a.deallocate(p);
  a.deallocate(inherited);
  if (a.trim() == 0) return 14;  // the child's own segments went back
  (void)a.memory_stats();
  if (a.gpu_accessible()) return 10;  // a child's memory is host memory only
  return 0;
}

class ForkedChildOnRocr : public GpuMapperDouble {
 protected:
  // The parent's allocator over the double's mapper, a GPU-mapped block of 7s, and then a child.
  void parent_and_child() {
    allocator a(alloc_options{}, topo_, std::make_unique<host_numa_source>(host_source_config{}),
                std::move(mapper_), {});
    ASSERT_TRUE(a.gpu_accessible());
    void* inherited = a.allocate(kMiB, on_node0());
    std::memset(inherited, 7, kMiB);
    const std::string parent_log = log();
    ASSERT_NE(parent_log.find(" -> SUCCESS"), std::string::npos) << "the parent maps: " << parent_log;
    const std::string failed = in_child([&] {
      umem::test::double_reset(path_);  // from here the log holds only the child's calls
      if (const int r = child_work(a, inherited); r != 0) return r;
      const std::string calls = log();
      if (!calls.empty()) {
        std::fprintf(stderr, "child's ROCr calls:\n%s", calls.c_str());
        return 20;
      }
      return 0;
    });
    EXPECT_EQ(failed, "") << "exit 1x: a step of child_work failed; 20: the child called ROCr; "
                             "91: an allocation threw (see stderr)";
    // The parent's segment is still its own, mapped, and unmaps at trim.
    EXPECT_TRUE(filled_with(inherited, kMiB, 7));
    a.deallocate(inherited);
    umem::test::double_reset(path_);
    EXPECT_GT(a.trim(), 0u);
    EXPECT_NE(log().find(" -> SUCCESS"), std::string::npos) << "the parent unmaps: " << log();
  }
};

TEST_F(ForkedChildOnRocr, XnackOffTheChildLocksNothingAndAllocatesHostMemory) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  ASSERT_EQ(static_cast<rocr_gpu_mapper&>(*mapper_).mode(), gpu_map_mode::lock);
  parent_and_child();
}

TEST_F(ForkedChildOnRocr, XnackOnTheChildSetsNoSvmAttributesAndAllocatesHostMemory) {
  claim_xnack_on();
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  ASSERT_EQ(static_cast<rocr_gpu_mapper&>(*mapper_).mode(), gpu_map_mode::svm);
  parent_and_child();
}

// The double is as strict as KFD: a ROCr call from the child fails. This is what a mapper that
// does not know it runs in a child would meet.
TEST_F(ForkedChildOnRocr, TheDoubleRefusesTheChildsRocrCalls) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  const auto lib = rocr_library::load_from(std::vector<std::string>{UMEM_ROCR_DOUBLE_PATH});
  std::vector<std::byte> page(4096);
  void* agent_ptr = nullptr;
  const std::string failed = in_child([&] {
    const auto st = lib.fn().hsa_amd_memory_unlock(page.data());
    const auto lock = lib.fn().hsa_amd_memory_lock(page.data(), page.size(), nullptr, 0, &agent_ptr);
    namespace rs = umem::hsa::rocr_compat::status;
    return st == rs::error && lock == rs::error ? 0 : 30;
  });
  EXPECT_EQ(failed, "");
}

// The same over HIP, as PyTorch for ROCm runs: the HIP double (over the ROCr double) refuses
// every memory call from a forked child.
class ForkedChildOnHip : public GpuMapperDouble {
 protected:
  void TearDown() override {
    if (hip_) hip_->detach_rocr();
  }
  std::optional<umem::test::mapped_hip_double> hip_;
};

TEST_F(ForkedChildOnHip, TheChildMakesNoHipCall) {
  ASSERT_NO_FATAL_FAILURE(start(UMEM_ROCR_DOUBLE_PATH, "7.1"));
  hip_.emplace(UMEM_HIP_DOUBLE_PATH);
  ASSERT_TRUE(hip_->ok()) << dlerror();
  ASSERT_EQ(hip_->attach_rocr(UMEM_ROCR_DOUBLE_PATH), 0) << hip_->last_message();
  hip_->reset(4);
  auto rt = umem::hip::hip_runtime::find_loaded_in(std::vector<std::string>{UMEM_HIP_DOUBLE_PATH});
  ASSERT_TRUE(rt.has_value());
  auto hip_rt = std::make_shared<const umem::hip::hip_runtime>(*std::move(rt));
  allocator a(alloc_options{}, topo_, std::make_unique<host_numa_source>(host_source_config{}),
              std::make_unique<hip_gpu_mapper>(hip_rt, "test"), {});
  void* inherited = a.allocate(kMiB, on_node0());
  std::memset(inherited, 7, kMiB);
  ASSERT_EQ(hip_->known(inherited), 1);
  const std::string failed = in_child([&] {
    hip_->reset(4);  // counts from here are the child's
    if (const int r = child_work(a, inherited); r != 0) return r;
    if (const long n = hip_->total_attempts(); n != 0) {
      std::fprintf(stderr, "the child made %ld HIP memory calls\n", n);
      return 20;
    }
    return 0;
  });
  EXPECT_EQ(failed, "") << "exit 1x: a step of child_work failed; 20: the child called HIP; "
                           "91: an allocation threw (see stderr)";
  EXPECT_EQ(hip_->known(inherited), 1) << "the parent's registration is its own";
  a.deallocate(inherited);
  EXPECT_GT(a.trim(), 0u);
  EXPECT_EQ(hip_->live_registrations(), 0);
}

}  // namespace
}  // namespace umem::alloc::test
