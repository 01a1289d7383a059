// The `hardware` tier, for an MI300A owner: the real ROCr (rocr_library::load), real host NUMA
// memory on every socket, made GPU-accessible by the mapper, checked with the runtime's own copy
// engine (hsa_amd_memory_async_copy to and from GPU memory of the GPU agent's COARSE pool, values
// compared; no kernel compiler needed) and with move_pages (pages stay on the expected node).
// ctest runs this binary twice, with HSA_XNACK=0 (lock mode) and HSA_XNACK=1 (SVM mode).
// Where ROCr finds no GPU (no library, no /dev/kfd) every test skips, printing why.
#include <gtest/gtest.h>
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/rocr_gpu_mapper.hpp"
#include "umem/core/error.hpp"
#include "umem/core/fs_root.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"
#include "umem/hsa_runtime/rocr_discovery.hpp"
#include "umem/hsa_runtime/rocr_handles.hpp"
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

    for (rocr_agent a : umem::hsa::agents_of(*lib_)) {
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
    for (rocr_pool p : umem::hsa::pools_of(*lib_, gpu)) {
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

  // Copies `bytes` with the runtime's copy engine and waits; the seconds it took.
  double copy(void* dst, rocr_agent dst_agent, const void* src, rocr_agent src_agent,
              std::size_t bytes = kBytes) const {
    umem::hsa::rocr_signal done;
    check(fn().hsa_signal_create(1, 0, nullptr, &done), "hsa_signal_create");
    const auto t0 = std::chrono::steady_clock::now();
    check(fn().hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, bytes, 0, nullptr, done),
          "hsa_amd_memory_async_copy");
    while (fn().hsa_signal_wait_scacquire(done, rc::signal_condition::lt, 1, ~0ull,
                                          rc::wait_state::blocked) != 0) {
    }
    const auto t1 = std::chrono::steady_clock::now();
    check(fn().hsa_signal_destroy(done), "hsa_signal_destroy");
    return std::chrono::duration<double>(t1 - t0).count();
  }

  std::uint64_t pool_size(rocr_pool p) const {
    std::uint64_t size = 0;
    check(fn().hsa_amd_memory_pool_get_info(p, rc::pool_info::size, &size), "pool info (SIZE)");
    return size;
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

// Device tensors on an APU are umem's host memory on the GPU's node (Note [Device placements] in
// allocator.hpp): for every socket and both kinds, allocated through umem's allocator as PyTorch's
// bridge does (device:D), copied to and from a buffer of the GPU's own COARSE pool by the copy
// engine (values compared), the bandwidth of each direction reported, and the pages' node checked.
TEST_F(Mi300aHardware, DeviceMemoryOfEachKindOnEverySocketCopiesAndStaysOnItsNode) {
  allocator a(parse_alloc_conf("thread_cache:0"));
  const auto gpus = a.topo().gpus();
  ASSERT_FALSE(gpus.empty()) << "the allocator's discovery found no GPU";
  constexpr std::size_t bytes = std::size_t{256} << 20;
  std::printf("| device | NUMA node | kind | host -> GPU pool (GB/s) | GPU pool -> host (GB/s) |\n"
              "|---|---|---|---|---|\n");
  for (std::size_t d = 0; d < gpus.size(); ++d) {
    const std::uint32_t kfd = gpus[d]->kfd_node;
    const auto binding = std::find_if(a.topo().gpu_numa.begin(), a.topo().gpu_numa.end(),
                                      [&](const auto& b) { return b.gpu_kfd_node == kfd; });
    ASSERT_TRUE(binding != a.topo().gpu_numa.end() && binding->numa_node) << "GPU " << d;
    const int node = *binding->numa_node;
    const rocr_agent gpu = gpus_.at(kfd);
    void* pool_buffer = nullptr;
    check(fn().hsa_amd_memory_pool_allocate(coarse_pool_of(gpu), bytes, 0, &pool_buffer),
          "hsa_amd_memory_pool_allocate");
    for (coherence kind : {coherence::coarse, coherence::fine}) {
      SCOPED_TRACE("device:" + std::to_string(d) + ", " + umem::to_string(kind));
      request r{placement{placement_kind::device, static_cast<int>(d), {}}, kind};
      auto* p = static_cast<unsigned char*>(a.allocate(bytes, r));
      EXPECT_EQ(a.kind_of(p), memory_kind::host) << "an APU's device memory is host memory";
      for (std::size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<unsigned char>(i >> 12);
      const double to_gpu = copy(pool_buffer, gpu, p, cpu_of(node), bytes);
      std::memset(p, 0, bytes);
      const double back = copy(p, cpu_of(node), pool_buffer, gpu, bytes);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < bytes; i += 4096)
        wrong += p[i] != static_cast<unsigned char>(i >> 12);
      EXPECT_EQ(wrong, 0u) << "pages that did not survive the round trip";
      const residency_report where = a.residency(p, bytes);
      const auto on_node = where.pages_per_node.count(node) ? where.pages_per_node.at(node) : 0;
      EXPECT_EQ(on_node, where.total_pages) << "pages not on node " << node;
      std::printf("| %zu | %d | %s | %.1f | %.1f |\n", d, node, umem::to_string(kind),
                  static_cast<double>(bytes) / to_gpu / 1e9,
                  static_cast<double>(bytes) / back / 1e9);
      a.deallocate(p);
    }
    check(fn().hsa_amd_memory_pool_free(pool_buffer), "hsa_amd_memory_pool_free");
  }
}

// The GPU's own pool on an APU is capped by the kernel's TTM limit (amdttm pages_limit, below the
// socket's memory); umem's device memory is NUMA memory locked for the GPU, not that pool, so it is
// expected to reach past the cap. Reports whether it did on device:0's socket, allocating in 1 GiB
// steps until it holds 1 GiB more than the pool's size; skips when the node has not that much free.
TEST_F(Mi300aHardware, DeviceMemoryThroughUmemGetsPastTheGpuPoolSize) {
  allocator a(parse_alloc_conf("thread_cache:0,spill:never"));
  const auto gpus = a.topo().gpus();
  ASSERT_FALSE(gpus.empty());
  const std::uint32_t kfd = gpus[0]->kfd_node;
  const std::uint64_t cap = pool_size(coarse_pool_of(gpus_.at(kfd)));
  const auto binding = std::find_if(a.topo().gpu_numa.begin(), a.topo().gpu_numa.end(),
                                    [&](const auto& b) { return b.gpu_kfd_node == kfd; });
  ASSERT_TRUE(binding != a.topo().gpu_numa.end() && binding->numa_node);
  const int node = *binding->numa_node;
  constexpr std::uint64_t step = std::uint64_t{1} << 30;
  long long node_free = 0;
  (void)numa_node_size64(node, &node_free);
  if (static_cast<std::uint64_t>(node_free) < cap + 2 * step)
    GTEST_SKIP() << "NUMA node " << node << " has " << node_free << " bytes free, fewer than the "
                 << "GPU pool's " << cap << " + 2 GiB this test needs";
  std::vector<void*> held;
  std::uint64_t total = 0;
  std::string stopped;
  const request r{placement{placement_kind::device, 0, {}}, std::nullopt};
  while (total <= cap) {
    try {
      auto* p = static_cast<unsigned char*>(a.allocate(step, r));
      for (std::uint64_t i = 0; i < step; i += 4096) p[i] = 1;  // back every page
      held.push_back(p);
      total += step;
    } catch (const umem::error& e) {
      stopped = e.what();
      break;
    }
  }
  std::printf("device:0 on NUMA node %d: GPU pool (TTM cap) %llu bytes; umem device memory held "
              "%llu bytes%s%s\n", node, static_cast<unsigned long long>(cap),
              static_cast<unsigned long long>(total), stopped.empty() ? "" : "; stopped: ",
              stopped.c_str());
  for (void* p : held) a.deallocate(p);
  EXPECT_GT(total, cap) << "umem's host-backed device memory did not get past the GPU pool's size";
}

}  // namespace
