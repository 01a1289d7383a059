// Inside the multi-NUMA VM (tests/vm): with umem as PyTorch's CPU allocator, every CPU tensor of a
// process bound by umem.torch.bind_local_rank() has all its pages on its rank's NUMA node.
//
// Named stand-ins (the VM has no Python): each rank is a child process, as torchrun starts them,
// with LOCAL_RANK=r and LOCAL_WORLD_SIZE=4 in its environment, and does what
// python/umem/torch/rank_binding.py's bind_local_rank() does: the rank and size from the first set
// launcher variable (its RANK_VARIABLES / SIZE_VARIABLES), the binding from the bridge's C ABI
// umem_torch_rank_binding_json(NULL, rank, size) (the live machine), then applying it:
// sched_setaffinity(0, cpus) as os.sched_setaffinity does, and umem_torch_set_memory_policy(node,
// "bind"). torch.cuda.set_device is skipped (no GPU). The tensors are what umem's CPU allocator
// extension (torch_bridge/extension/umem_cpu_allocator.cpp) asks for every torch.empty/randn on
// the CPU and every DataLoader batch: umem_torch_host_malloc(nbytes, -1, &p) (-1: the configured
// placement, `local`: the calling thread's node) and umem_torch_host_free.
//
// Per rank: the bridge is created before binding (umem.torch.enable() comes first) and serves a
// few tensors then, as importing torch does; after binding, two steps of a training loop each
// allocate a mix of sizes (64 B to 64 MiB, several of each) on the bound thread and on a thread
// started after binding (bind_local_rank's policy is inherited by threads created later,
// umem_torch.h), write every page, check with move_pages(2) (query mode, the kernel's view) that
// every page is on the rank's node, and free everything (the thread's blocks from the main
// thread); the second step gets its blocks from umem's caches.
//
// The rank's node is the one binding chose, and the one expected: the VM has no GPUs, so the
// slots are the NUMA nodes with CPUs, ascending (rank_binding.hpp), and rank r of 4 gets node r,
// with its CPUs and device -1. On a 4-socket MI300A rank r gets GPU r and that GPU's node, also r:
// checked here on the captured machine (rocminfo + numactl captures, UMEM_FIXTURES_DIR) as
// bind_local_rank(topology=snapshot, apply=False) computes it.
#include <nlohmann/json.hpp>
#include <numa.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest-spi.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "placement_checks.hpp"
#include "support/fixtures.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/importers/numactl_importer.hpp"
#include "umem/importers/rocminfo_importer.hpp"
#include "umem/numa/gpu_numa_mapping.hpp"
#include "umem/umem_torch.h"

namespace umem::placement_test {
namespace {

constexpr int local_world_size = 4;
constexpr std::size_t KiB = 1024, MiB = 1024 * KiB;

// What a CPU training loop allocates (per thread, per step): scalars and small index tensors,
// page-sized and odd-sized activations, batches of a few MiB, and large buffers.
struct size_count {
  std::size_t bytes;
  int count;
};
// About 78 MiB per thread and step, so 2 large buffers per step and rank; kept small because the
// VM emulates in software.
constexpr size_count training_mix[] = {{64, 16},     {4 * KiB, 16}, {100 * KiB, 8},
                                       {1 * MiB, 4}, {3 * MiB, 3},  {64 * MiB, 1}};

// rank_binding.py's launcher variables, in its order (torchrun sets LOCAL_RANK, LOCAL_WORLD_SIZE).
constexpr const char* rank_variables[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "MV2_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                          "SLURM_LOCALID", "FLUX_TASK_LOCAL_ID"};
constexpr const char* size_variables[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "MV2_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                          "SLURM_NTASKS_PER_NODE"};

// rank_binding.py's _from_env: the first variable that is set and not empty; -1 if none.
template <std::size_t N>
int from_env(const char* const (&names)[N]) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return -1;
}

nlohmann::json rank_binding(const char* snapshot_json, int rank, int size) {
  char* text = umem_torch_rank_binding_json(snapshot_json, rank, size);
  if (text == nullptr) {
    ADD_FAILURE() << "umem_torch_rank_binding_json: " << umem_torch_last_error();
    return nlohmann::json::object();
  }
  nlohmann::json j = nlohmann::json::parse(text);
  umem_torch_string_free(text);
  return j;
}

struct block {
  void* p;
  std::size_t bytes;
};

class cpu_tensor_rank_placement : public placement_checks {
 protected:
  // The node rank_binding.hpp gives local rank r of 4 on this machine without GPUs: the slots are
  // the nodes with CPUs, ascending; 4 ranks over fewer slots that divide 4 share them
  // consecutively. In the VM (4 nodes) that is node r.
  static int expected_node(int rank) {
    std::vector<int> slots;
    for (const auto& n : machine().numa.nodes)
      if (!n.cpus.empty()) slots.push_back(n.os_index);
    const int n = static_cast<int>(slots.size());
    if (local_world_size > n && local_world_size % n == 0)
      return slots[static_cast<std::size_t>(rank / (local_world_size / n))];
    return slots[static_cast<std::size_t>(rank % n)];
  }

  // Every page that [p, p+bytes) touches, per node (move_pages, nodes=NULL).
  static std::map<int, std::size_t> pages_of(const block& b) {
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto first = reinterpret_cast<std::uintptr_t>(b.p) & ~(page - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(b.p) + b.bytes + page - 1) & ~(page - 1);
    return pages_by_node(reinterpret_cast<const void*>(first), end - first);
  }

  // One step's tensors of one thread: allocated with node -1, every page written (first touch:
  // where the kernel places a page that umem did not populate). Filling whole tensors would only
  // slow the emulated VM down.
  static void allocate_mix(std::vector<block>& out, unsigned char fill) {
    for (const size_count& s : training_mix)
      for (int i = 0; i < s.count; ++i) {
        void* p = nullptr;
        ASSERT_EQ(umem_torch_host_malloc(s.bytes, -1, &p), UMEM_OK) << umem_torch_last_error();
        auto* bytes = static_cast<volatile unsigned char*>(p);
        for (std::size_t off = 0; off < s.bytes; off += 4096) bytes[off] = fill;
        bytes[s.bytes - 1] = fill;
        out.push_back({p, s.bytes});
      }
  }

  // Every page of every block on `node`, one failure naming the blocks that are not; returns the
  // number of pages checked.
  static std::size_t expect_blocks_on(int node, const std::vector<block>& blocks,
                                      const char* who) {
    std::size_t pages = 0, misplaced = 0;
    std::map<int, std::size_t> elsewhere;  // node (or -errno: not present) -> pages
    std::string sizes;
    for (const block& b : blocks) {
      bool off = false;
      for (const auto& [where, count] : pages_of(b)) {
        pages += count;
        if (where != node) {
          elsewhere[where] += count;
          off = true;
        }
      }
      if (off && ++misplaced <= 8) sizes += " " + std::to_string(b.bytes);
    }
    std::string by_node;
    for (const auto& [where, count] : elsewhere)
      by_node += " " + std::to_string(count) + " on " + std::to_string(where) + ";";
    EXPECT_EQ(misplaced, 0u) << who << ": " << misplaced << " of " << blocks.size()
                             << " blocks have pages off node " << node << " (sizes in bytes:"
                             << sizes << (misplaced > 8 ? " ..." : "")
                             << "); their pages elsewhere (node, or -errno):" << by_node;
    return pages;
  }

  static void run_rank(int rank);
};

// One rank, in its own process: bind as bind_local_rank does, then the training loop's tensors.
void cpu_tensor_rank_placement::run_rank(int rank) {
  // The launcher's environment (torchrun); no other launcher's variables.
  for (const char* v : rank_variables) unsetenv(v);
  for (const char* v : size_variables) unsetenv(v);
  setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(local_world_size).c_str(), 1);

  // umem.torch.enable(): the bridge exists, and torch allocates a few CPU tensors before binding.
  ASSERT_EQ(umem_torch_init(nullptr), UMEM_OK) << umem_torch_last_error();
  std::vector<block> before;
  allocate_mix(before, 0x11);
  for (const block& b : before) ASSERT_EQ(umem_torch_host_free(b.p), UMEM_OK);

  // bind_local_rank(): the rank from the environment, the binding of the live machine, applied.
  const int local_rank = from_env(rank_variables);
  const int local_size = from_env(size_variables);
  ASSERT_EQ(local_rank, rank);
  ASSERT_EQ(local_size, local_world_size);
  const nlohmann::json b = rank_binding(nullptr, local_rank, local_size);
  ASSERT_TRUE(b.contains("numa_node")) << b.dump();
  const int node = b["numa_node"].get<int>();
  const int expected = expected_node(rank);
  std::printf("[rank %d] binding: %s\n", rank, b.dump().c_str());
  ASSERT_EQ(node, expected) << "rank binding chose node " << node << " for local rank " << rank;
  EXPECT_EQ(b["device"].get<int>(), -1) << "the VM has no GPU";
  EXPECT_EQ(b["cpus"].get<std::vector<unsigned>>(), cpus_of(node));
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : b["cpus"].get<std::vector<unsigned>>()) CPU_SET(c, &set);
  ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0) << std::strerror(errno);
  ASSERT_EQ(umem_torch_set_memory_policy(node, "bind"), UMEM_OK) << umem_torch_last_error();
  ASSERT_EQ(numa_node_of_cpu(sched_getcpu()), node);

  std::size_t pages = 0, blocks = 0;
  for (int step = 0; step < 2; ++step) {
    std::vector<block> mine, theirs;
    allocate_mix(mine, static_cast<unsigned char>(0x20 + step));
    // A thread started after binding (DataLoader, intra-op pool): it inherits the binding.
    std::thread worker([&] {
      EXPECT_EQ(numa_node_of_cpu(sched_getcpu()), node) << "a new thread left the rank's CPUs";
      allocate_mix(theirs, static_cast<unsigned char>(0x40 + step));
      pages += expect_blocks_on(node, theirs, "the thread started after binding");
    });
    worker.join();
    pages += expect_blocks_on(node, mine, "the bound thread");
    blocks += mine.size() + theirs.size();
    for (const auto* list : {&mine, &theirs})
      for (const block& x : *list)
        EXPECT_EQ(umem_torch_host_free(x.p), UMEM_OK) << umem_torch_last_error();
  }
  std::printf("[rank %d] node %d: %zu CPU tensors in 2 steps on 2 threads, %zu pages checked\n",
              rank, node, blocks, pages);
}

TEST_F(cpu_tensor_rank_placement, every_page_of_every_cpu_tensor_is_on_the_ranks_node) {
  if (std::getenv("UMEM_VM_EXPECT_NODES") != nullptr) {
    ASSERT_EQ(nodes(), (std::vector<int>{0, 1, 2, 3})) << "the VM suite boots 4 nodes";
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // The ranks run at once, as torchrun starts them; each reports its failures on stderr.
  std::vector<pid_t> children;
  for (int rank = 0; rank < local_world_size; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork: " << std::strerror(errno);
    if (pid == 0) {
      ::testing::TestPartResultArray failures;
      {
        const ::testing::ScopedFakeTestPartResultReporter collect(
            ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS, &failures);
        run_rank(rank);
      }
      for (int i = 0; i < failures.size(); ++i) {
        const ::testing::TestPartResult& r = failures.GetTestPartResult(i);
        std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank,
                     r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(failures.size() == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (int rank = 0; rank < local_world_size; ++rank) {
    int status = 0;
    ASSERT_EQ(waitpid(children[static_cast<std::size_t>(rank)], &status, 0),
              children[static_cast<std::size_t>(rank)]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "local rank " << rank << " failed (status " << status
        << "; its messages are above, prefixed [rank " << rank << "])";
  }
}

// What bind_local_rank(topology=snapshot, apply=False) gives on a 4-socket MI300A: rank r of 4 gets
// GPU r (KFD node 4 + r) and its node, r: the node the VM test above expects for rank r.
TEST_F(cpu_tensor_rank_placement, on_a_4_socket_mi300a_rank_r_gets_gpu_r_and_its_node_r) {
  UMEM_REQUIRE_FIXTURE(rocminfo, "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt");
  UMEM_REQUIRE_FIXTURE(numactl, "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt");
  // umtopo --rocminfo --numactl --capture's topology (tools/umtopo/inputs.cpp).
  topology t = importers::import_rocminfo(test::read_text(rocminfo), rocminfo.string()).topo;
  t.numa = importers::import_numactl(test::read_text(numactl), numactl.string()).numa;
  t.gpu_numa = numa::map_gpus_to_numa(t, nullptr);
  const std::string snapshot = snapshot_to_json(t);
  for (int rank = 0; rank < local_world_size; ++rank) {
    const nlohmann::json b = rank_binding(snapshot.c_str(), rank, local_world_size);
    SCOPED_TRACE(b.dump());
    EXPECT_EQ(b.value("numa_node", -2), rank);
    EXPECT_EQ(b.value("device", -2), rank);
    EXPECT_EQ(b.value("gpu_kfd_node", nlohmann::json()), nlohmann::json(4 + rank));
  }
}

}  // namespace
}  // namespace umem::placement_test
