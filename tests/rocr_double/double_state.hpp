// The ROCr test double's state: the machine it serves, the ROCr release it imitates, and every
// allocation, lock, SVM range, signal and VMM object handed out, plus the call log tests read.
//
// Note [What the double is]
// A shared library exporting the hsa_* entry points umem uses, loaded through the same dlopen
// path as the real runtime (UMEM_HSA_RUNTIME_LIB). hsa_init loads the snapshot JSON named by
// UMEM_ROCR_DOUBLE_SNAPSHOT (unset: behave like a node without /dev/kfd, hsa_init returns
// OUT_OF_RESOURCES). UMEM_ROCR_DOUBLE_VERSION = 5.2.3 | 6.4 | 7.1 picks the release imitated:
// attributes a release lacks answer INVALID_ARGUMENT. An attribute the snapshot leaves nullopt
// also answers INVALID_ARGUMENT, so discovery through the double rebuilds exactly the snapshot.
// Symbols cannot be removed at run time, so the double is built twice: with the VMM/dmabuf
// exports (6.4/7.1) and without them (5.2.3); asking a build for the other kind fails hsa_init.
// It is strict on purpose, to serve as a call checker: bad handles, non-null allow_access flags
// and frees of unknown pointers are rejected as ROCr does, and every memory call is logged.
// Memory, signal and VMM calls from a process other than the one whose hsa_init opened the
// double (a forked child) answer HSA_STATUS_ERROR and are logged: KFD refuses every ioctl from a
// process other than the one that opened /dev/kfd (Linux drivers/gpu/drm/amd/amdkfd/
// kfd_chardev.c, kfd_ioctl: "Using KFD FD in wrong process", -EBADF), and libhsakmt fails such
// calls before the ioctl (libhsakmt.h CHECK_KFD_OPEN, is_forked_child). Agent and pool queries
// still answer: ROCr serves them from what it cached at hsa_init.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../cuda_double/counted_faults.hpp"
#include "umem/core/topology.hpp"

#define UMEM_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))

namespace umem::rocr_double {

enum class release { v5_2_3, v6_4, v7_1 };

struct allocation {
  std::string id;  // "a1", "a2": stable names for the call log
  std::size_t size = 0;
  std::size_t mapped = 0;
  std::size_t agent = 0;          // index of the pool's agent
  std::size_t pool = 0;           // index of the pool within its agent
  std::set<std::size_t> allowed;  // agents given access by allow_access
};

// A locked host range. Locking exactly the same (start, size) again counts instead of failing,
// as libhsakmt does (Note [Locking a range twice] in double_memory.cpp).
struct locked_range {
  std::string id;  // "l1", ...
  std::size_t size = 0;
  std::vector<std::size_t> agents;       // empty: all agents; a repeated lock adds its agents
  std::optional<std::size_t> cpu_agent;  // owner of the pool of the first lock_to_pool
  unsigned count = 1;                    // locks of this range not yet unlocked
};

struct state {
  std::mutex mu;
  int init_count = 0;
  int init_pid = 0;  // the process whose hsa_init opened the double
  release version = release::v7_1;
  topology machine;
  std::string log;
  unsigned next_id = 1;
  std::map<std::uintptr_t, allocation> allocations;  // by start address
  std::map<std::uintptr_t, locked_range> locks;
  // SVM attributes by (start, size): attribute -> value, agent access by agent index.
  std::map<std::pair<std::uintptr_t, std::size_t>, std::map<std::uint64_t, std::uint64_t>> svm;
  std::map<std::pair<std::uintptr_t, std::size_t>, std::map<std::size_t, std::uint64_t>> svm_access;
  std::set<std::uint64_t> signals;
  int event_handlers = 0;  // registered; the double never raises GPU events
  // VMM (6.4/7.1 build): reserved ranges, physical handles, mappings (start -> size, handle).
  std::map<std::uintptr_t, std::size_t> reservations;
  std::map<std::uint64_t, std::pair<std::size_t, std::size_t>> vmem_handles;  // -> size, agent
  std::map<std::uintptr_t, std::pair<std::size_t, std::uint64_t>> mappings;
  std::map<std::uintptr_t, std::map<std::size_t, std::uint32_t>> access;  // mapping -> agent perms
  std::set<int> dmabufs;
  // Test controls (umem_rocr_double_* in double_memory.cpp), cleared at the last hsa_shut_down:
  // bytes of an agent's memory other processes hold, by KFD node, and a status the next
  // hsa_amd_memory_pool_allocate answers instead of allocating.
  std::map<std::uint32_t, std::uint64_t> foreign_use;
  std::optional<std::uint32_t> fail_next_pool_allocate;
  std::optional<std::uint32_t> fail_next_lock;  // memory_lock and memory_lock_to_pool
  // VMM test control (umem_rocr_double_fail_next_vmem in double_vmem.cpp): a status the next
  // call of a VMM entry point answers instead of acting, by the call's log name
  // ("vmem_address_reserve" for both reserve calls, "vmem_handle_create", "vmem_map",
  // "vmem_set_access").
  std::map<std::string, std::uint32_t> fail_next_vmem;
  // Counted faults (umem_rocr_double_fail_call in double_state.cpp; counted_faults.hpp): every
  // memory_lock, memory_lock_to_pool, pool_allocate and hsa_amd_vmem_* call that makes memory
  // counts, and the Nth from the arming on answers OUT_OF_RESOURCES (once or from N on).
  umem::test_doubles::counted_faults faults;
};

// The one instance; every entry point locks state().mu.
state& the_state();

// Built with the VMM and dmabuf exports (6.4/7.1 build) or without (5.2.3 build).
bool built_with_vmem();

// Handles: a tag in the top 16 bits, 1-based indices below, so 0 and foreign values never
// decode. Valid only while initialised and only for this machine.
std::uint64_t agent_handle(std::size_t agent);
std::uint64_t pool_handle(std::size_t agent, std::size_t pool);
std::uint64_t isa_handle(std::size_t agent, std::size_t isa);
std::optional<std::size_t> decode_agent(const state& s, std::uint64_t handle);
std::optional<std::pair<std::size_t, std::size_t>> decode_pool(const state& s,
                                                               std::uint64_t handle);
std::optional<std::pair<std::size_t, std::size_t>> decode_isa(const state& s, std::uint64_t handle);

// Whether this call of the fault-able entry point `entry` ("hsa_amd_memory_pool_allocate") fails
// by the counted fault switch; logs it when it does. Its status is then OUT_OF_RESOURCES.
bool counted_failure(state& s, const char* entry);

// Why a memory, signal or VMM entry point must fail at once: NOT_INITIALIZED before hsa_init,
// ERROR (logged) in a process other than the one that initialised the double; nullopt if usable.
std::optional<std::uint32_t> unusable(state& s);

// Appends "line\n" to the call log.
void log_call(state& s, const std::string& line);
// "SUCCESS", "INVALID_ARGUMENT", ... for the call log.
const char* status_name(std::uint32_t status);
// The allocation or lock that contains [p, p+size), for naming pointers in the log.
std::string name_pointer(const state& s, const void* p);
std::string next_id(state& s, const char* prefix);
// What an agent has left (HSA_AMD_AGENT_INFO_MEMORY_AVAIL): its GLOBAL pools are views of one
// memory, the size of the largest, less every allocation and VMM handle from any of them and
// foreign_use.
std::uint64_t agent_memory_avail(const state& s, std::size_t agent);

}  // namespace umem::rocr_double
