// The `hardware` tier, for an MI300A owner: the real ROCr (rocr_library::load), real host NUMA
// memory on every socket, made GPU-accessible by the mapper, checked with the runtime's own copy
// engine (hsa_amd_memory_async_copy to and from GPU memory of the GPU agent's COARSE pool, values
// compared; no kernel compiler needed) and with move_pages (pages stay on the expected node).
// ctest runs this binary twice, with HSA_XNACK=0 (lock mode) and HSA_XNACK=1 (SVM mode).
// Where ROCr finds no GPU (no library, no /dev/kfd) every test skips, printing why.
#include <gtest/gtest.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_library.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/numa/hwloc_source.hpp"

namespace {

using namespace umem::alloc;
using umem::coherence;
using umem::hsa::rocr_agent;
using umem::hsa::rocr_library;
using umem::hsa::rocr_pool;
namespace rc = umem::hsa::rocr_compat;

constexpr std::size_t kBytes = 4u << 20;  // two huge pages

template <class Handle>
umem::hsa::rocr_status collect(Handle h, void* out) {
  static_cast<std::vector<Handle>*>(out)->push_back(h);
  return rc::status::success;
}

// Anonymous memory bound to one node and touched there (pages allocated by the kernel on `node`).
struct host_block {
  void* base = MAP_FAILED;
  explicit host_block(int node) {
    base = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return;
    std::vector<unsigned long> mask(static_cast<std::size_t>(node) / 64 + 1, 0);
    mask[static_cast<std::size_t>(node) / 64] = 1ul << (node % 64);
    if (mbind(base, kBytes, MPOL_BIND, mask.data(), mask.size() * 64 + 1, MPOL_MF_STRICT) != 0) {
      munmap(base, kBytes);
      base = MAP_FAILED;
    }
  }
  ~host_block() {
    if (base != MAP_FAILED) munmap(base, kBytes);
  }
  host_block(const host_block&) = delete;
  host_block& operator=(const host_block&) = delete;
  unsigned char* bytes() const { return static_cast<unsigned char*>(base); }
};

class Mi300aHardware : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      lib_.emplace(rocr_library::load());
    } catch (const umem::error& e) {
      GTEST_SKIP() << "hardware tier: no ROCr runtime could be loaded: " << e.what();
    }
    umem::hsa::discover_rocr(topo_, *lib_);
    if (topo_.hsa.state != umem::runtime_state::available)
      GTEST_SKIP() << "hardware tier: ROCr finds no GPU (" << umem::to_string(topo_.hsa.state)
                   << "): " << topo_.hsa.state_reason;
    topo_.numa = umem::numa::load_hwloc_live();
    const umem::fs_root live;
    topo_.gpu_numa = umem::numa::map_gpus_to_numa(topo_, &live);
    mapper_ = std::make_unique<rocr_gpu_mapper>(topo_, *lib_);
    session_.emplace(*lib_);  // for this test's own calls: GPU pool, signals, copies

    std::vector<rocr_agent> agents;
    check(fn().hsa_iterate_agents(collect<rocr_agent>, &agents), "hsa_iterate_agents");
    for (rocr_agent a : agents) {
      std::uint32_t device = 0, kfd = 0;
      check(fn().hsa_agent_get_info(a, rc::agent_info::device, &device), "hsa_agent_get_info");
      check(fn().hsa_agent_get_info(a, rc::agent_info::driver_node_id, &kfd),
            "hsa_agent_get_info");
      (device == rc::device_type::gpu ? gpus_ : cpus_)[kfd] = a;
    }
  }

  const umem::hsa::rocr_functions& fn() const { return lib_->fn(); }
  void check(umem::hsa::rocr_status st, const char* call) const { lib_->check(st, call); }

  rocr_pool coarse_pool_of(rocr_agent gpu) const {
    std::vector<rocr_pool> pools;
    check(fn().hsa_amd_agent_iterate_memory_pools(gpu, collect<rocr_pool>, &pools),
          "hsa_amd_agent_iterate_memory_pools");
    for (rocr_pool p : pools) {
      std::uint32_t segment = 0, flags = 0;
      check(fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::segment, &segment), "pool info");
      check(fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::global_flags, &flags), "pool info");
      if (segment == 0 && (flags & umem::pool_flag::coarse_grained) != 0) return p;
    }
    throw umem::error(umem::errc::not_found, "GPU agent has no COARSE GLOBAL pool");
  }

  // The CPU agent serving NUMA node `node`: KFD CPU node i is the i-th NUMA node with CPUs.
  rocr_agent cpu_of(int node) const {
    std::uint32_t i = 0;
    for (const auto& n : topo_.numa.nodes) {
      if (n.os_index == node) return cpus_.at(i);
      if (!n.cpus.empty()) ++i;
    }
    throw umem::error(umem::errc::not_found, "no CPU agent for NUMA node " + std::to_string(node));
  }

  void copy(void* dst, rocr_agent dst_agent, const void* src, rocr_agent src_agent) const {
    umem::hsa::rocr_signal done;
    check(fn().hsa_signal_create(1, 0, nullptr, &done), "hsa_signal_create");
    check(fn().hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, kBytes, 0, nullptr, done),
          "hsa_amd_memory_async_copy");
    while (fn().hsa_signal_wait_scacquire(done, rc::signal_condition::lt, 1, ~0ull,
                                          rc::wait_state::blocked) != 0) {
    }
    check(fn().hsa_signal_destroy(done), "hsa_signal_destroy");
  }

  std::optional<rocr_library> lib_;  // outlives the session and the mapper
  umem::topology topo_;
  std::unique_ptr<gpu_mapper> mapper_;
  std::optional<umem::hsa::rocr_session> session_;
  std::map<std::uint32_t, rocr_agent> cpus_, gpus_;  // by KFD node
};

TEST_F(Mi300aHardware, MapperModeFollowsHsaXnack) {
  const char* xnack = std::getenv("HSA_XNACK");  // set by ctest for this run
  if (xnack == nullptr || (std::strcmp(xnack, "0") != 0 && std::strcmp(xnack, "1") != 0))
    GTEST_SKIP() << "run through ctest, which sets HSA_XNACK=0 or 1";
  const bool on = std::strcmp(xnack, "1") == 0;
  EXPECT_EQ(topo_.xnack_enabled(), on);
  const auto* rocr = dynamic_cast<const rocr_gpu_mapper*>(mapper_.get());
  ASSERT_NE(rocr, nullptr) << mapper_->describe();
  EXPECT_EQ(rocr->mode(), on ? gpu_map_mode::svm : gpu_map_mode::lock) << mapper_->describe();
}

TEST_F(Mi300aHardware, EverySocketsMemoryRoundTripsThroughItsGpuAndStaysOnItsNode) {
  ASSERT_FALSE(topo_.gpu_numa.empty());
  for (const auto& b : topo_.gpu_numa) {
    ASSERT_TRUE(b.numa_node) << "GPU KFD node " << b.gpu_kfd_node << ": " << b.evidence;
    const int node = *b.numa_node;
    const rocr_agent gpu = gpus_.at(b.gpu_kfd_node);
    const rocr_agent cpu = cpu_of(node);
    void* gpu_mem = nullptr;
    check(fn().hsa_amd_memory_pool_allocate(coarse_pool_of(gpu), kBytes, 0, &gpu_mem),
          "hsa_amd_memory_pool_allocate");
    for (coherence kind : {coherence::fine, coherence::coarse, coherence::extended_fine}) {
      SCOPED_TRACE("NUMA node " + std::to_string(node) + ", " + umem::to_string(kind));
      host_block host(node);
      ASSERT_NE(host.base, MAP_FAILED) << "mmap/mbind on node " << node << " failed";
      const auto value = [&](std::size_t i) {
        return static_cast<unsigned char>(i * 7 + static_cast<std::size_t>(node) * 31 +
                                          static_cast<std::size_t>(kind));
      };
      for (std::size_t i = 0; i < kBytes; ++i) host.bytes()[i] = value(i);
      const segment s{host.base, kBytes, node_binding{bind_mode::bind, {node}}, kind, false};
      mapper_->map(s);
      copy(gpu_mem, gpu, host.base, cpu);  // umem memory -> GPU memory
      std::memset(host.base, 0, kBytes);
      copy(host.base, cpu, gpu_mem, gpu);  // and back
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < kBytes; ++i) wrong += host.bytes()[i] != value(i);
      EXPECT_EQ(wrong, 0u) << "bytes that did not survive the round trip";

      const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      std::vector<void*> pages;
      for (std::size_t off = 0; off < kBytes; off += page) pages.push_back(host.bytes() + off);
      std::vector<int> status(pages.size(), -1);
      ASSERT_EQ(move_pages(0, pages.size(), pages.data(), nullptr, status.data(), 0), 0)
          << std::strerror(errno);
      std::size_t elsewhere = 0;
      for (int st : status) elsewhere += st != node;
      EXPECT_EQ(elsewhere, 0u) << "pages not on node " << node << " (first status "
                               << status.front() << ")";
      mapper_->unmap(s);
    }
    check(fn().hsa_amd_memory_pool_free(gpu_mem), "hsa_amd_memory_pool_free");
  }
}

}  // namespace
