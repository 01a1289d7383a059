// Lifetime of the double (hsa_init, hsa_shut_down), status strings, handles and the call log.
#include "double_state.hpp"

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string_view>

#include "umem/core/snapshot.hpp"

namespace umem::rocr_double {
namespace {

constexpr std::uint64_t kTagShift = 48;
constexpr std::uint64_t kAgentTag = 0x4147ull << kTagShift;  // "AG"
constexpr std::uint64_t kPoolTag = 0x504Cull << kTagShift;   // "PL"
constexpr std::uint64_t kIsaTag = 0x4953ull << kTagShift;    // "IS"
constexpr std::uint64_t kTagMask = 0xFFFFull << kTagShift;

struct status_entry {
  std::uint32_t status;
  const char* name;
  const char* text;
};
constexpr status_entry kStatuses[] = {
    {HSA_STATUS_SUCCESS, "SUCCESS",
     "HSA_STATUS_SUCCESS: The function has been executed successfully."},
    {HSA_STATUS_INFO_BREAK, "INFO_BREAK",
     "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted by the "
     "application before completing."},
    {HSA_STATUS_ERROR, "ERROR", "HSA_STATUS_ERROR: A generic error has occurred."},
    {HSA_STATUS_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT",
     "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a precondition "
     "stated in the documentation of the corresponding formal argument."},
    {HSA_STATUS_ERROR_INVALID_ALLOCATION, "INVALID_ALLOCATION",
     "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid."},
    {HSA_STATUS_ERROR_INVALID_AGENT, "INVALID_AGENT",
     "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid."},
    {HSA_STATUS_ERROR_INVALID_SIGNAL, "INVALID_SIGNAL",
     "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid."},
    {HSA_STATUS_ERROR_OUT_OF_RESOURCES, "OUT_OF_RESOURCES",
     "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."},
    {HSA_STATUS_ERROR_NOT_INITIALIZED, "NOT_INITIALIZED",
     "HSA_STATUS_ERROR_NOT_INITIALIZED: An API other than hsa_init has been invoked while the "
     "reference count of the HSA runtime is zero."},
    {HSA_STATUS_ERROR_INVALID_ISA, "INVALID_ISA",
     "HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid."},
    {HSA_STATUS_ERROR_INVALID_MEMORY_POOL, "INVALID_MEMORY_POOL",
     "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid."},
};

const status_entry* find_status(std::uint32_t status) {
  for (const auto& e : kStatuses)
    if (e.status == status) return &e;
  return nullptr;
}

std::optional<release> parse_release(std::string_view v) {
  if (v == "5.2.3") return release::v5_2_3;
  if (v == "6.4") return release::v6_4;
  if (v == "7.1") return release::v7_1;
  return std::nullopt;
}

// Real ROCr frees everything at the last hsa_shut_down; the double also names what leaked.
void release_everything(state& s) {
  for (auto& [start, a] : s.allocations) {
    log_call(s, "leak " + a.id + " size=" + std::to_string(a.size));
    munmap(reinterpret_cast<void*>(start), a.mapped);
  }
  for (auto& [start, l] : s.locks)
    log_call(s, "leak " + l.id + " size=" + std::to_string(l.size) +
                    (l.count > 1 ? " count=" + std::to_string(l.count) : std::string()));
  for (std::uint64_t sig : s.signals) {
    log_call(s, "leak signal");
    delete reinterpret_cast<hsa_signal_value_t*>(sig);
  }
  s.allocations.clear();
  s.locks.clear();
  s.svm.clear();
  s.svm_access.clear();
  s.signals.clear();
  s.event_handlers = 0;
  for (const auto& [start, size] : s.reservations) munmap(reinterpret_cast<void*>(start), size);
  for (int fd : s.dmabufs) close(fd);
  s.reservations.clear();
  s.vmem_handles.clear();
  s.mappings.clear();
  s.access.clear();
  s.dmabufs.clear();
  s.foreign_use.clear();
  s.fail_next_pool_allocate.reset();
  s.fail_next_lock.reset();
  s.fail_next_vmem.clear();
  s.faults.arm(0, false);
  s.machine = topology{};
}

}  // namespace

state& the_state() {
  static state s;
  return s;
}

bool built_with_vmem() { return UMEM_ROCR_DOUBLE_WITH_VMEM != 0; }

bool counted_failure(state& s, const char* entry) {
  if (!s.faults.fails(entry)) return false;
  log_call(s, std::string("injected ") + entry + " OUT_OF_RESOURCES");
  return true;
}

std::uint64_t agent_handle(std::size_t agent) { return kAgentTag | (agent + 1); }
std::uint64_t pool_handle(std::size_t agent, std::size_t pool) {
  return kPoolTag | ((agent + 1) << 16) | (pool + 1);
}
std::uint64_t isa_handle(std::size_t agent, std::size_t isa) {
  return kIsaTag | ((agent + 1) << 16) | (isa + 1);
}

std::optional<std::size_t> decode_agent(const state& s, std::uint64_t handle) {
  if (s.init_count == 0 || (handle & kTagMask) != kAgentTag) return std::nullopt;
  const std::uint64_t index = handle & ~kTagMask;
  if (index == 0 || index > s.machine.agents.size()) return std::nullopt;
  return static_cast<std::size_t>(index - 1);
}

namespace {
std::optional<std::pair<std::size_t, std::size_t>> decode_pair(const state& s, std::uint64_t handle,
                                                               std::uint64_t tag) {
  if (s.init_count == 0 || (handle & kTagMask) != tag) return std::nullopt;
  const std::uint64_t agent = (handle >> 16) & 0xFFFFFFFFull;
  const std::uint64_t item = handle & 0xFFFFull;
  if (agent == 0 || agent > s.machine.agents.size() || item == 0) return std::nullopt;
  return std::pair<std::size_t, std::size_t>(agent - 1, item - 1);
}
}  // namespace

std::optional<std::pair<std::size_t, std::size_t>> decode_pool(const state& s,
                                                               std::uint64_t handle) {
  auto d = decode_pair(s, handle, kPoolTag);
  if (!d || d->second >= s.machine.agents[d->first].pools.size()) return std::nullopt;
  return d;
}

std::optional<std::pair<std::size_t, std::size_t>> decode_isa(const state& s,
                                                              std::uint64_t handle) {
  auto d = decode_pair(s, handle, kIsaTag);
  if (!d || d->second >= s.machine.agents[d->first].isas.size()) return std::nullopt;
  return d;
}

std::optional<std::uint32_t> unusable(state& s) {
  if (s.init_count == 0) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (const int pid = static_cast<int>(getpid()); pid != s.init_pid) {
    log_call(s, "call from process " + std::to_string(pid) + ", not the initialising " +
                    std::to_string(s.init_pid) + " (a forked child) -> ERROR");
    return HSA_STATUS_ERROR;
  }
  return std::nullopt;
}

void log_call(state& s, const std::string& line) {
  s.log += line;
  s.log += '\n';
}

const char* status_name(std::uint32_t status) {
  const auto* e = find_status(status);
  return e != nullptr ? e->name : "UNKNOWN_STATUS";
}

std::string name_pointer(const state& s, const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  auto describe = [addr](const auto& ranges) -> std::string {
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return {};
    --it;
    if (addr >= it->first + it->second.size) return {};
    const auto offset = addr - it->first;
    return offset == 0 ? it->second.id : it->second.id + "+" + std::to_string(offset);
  };
  if (auto n = describe(s.allocations); !n.empty()) return n;
  if (auto n = describe(s.locks); !n.empty()) return n;
  return p == nullptr ? "null" : "host";
}

std::string next_id(state& s, const char* prefix) { return prefix + std::to_string(s.next_id++); }

std::uint64_t agent_memory_avail(const state& s, std::size_t agent) {
  std::uint64_t capacity = 0, used = 0;
  for (const auto& p : s.machine.agents[agent].pools)
    if (p.is_global()) capacity = std::max(capacity, p.size_bytes);
  for (const auto& [start, a] : s.allocations)
    if (a.agent == agent) used += a.mapped;
  for (const auto& [handle, h] : s.vmem_handles)
    if (h.second == agent) used += h.first;
  if (auto it = s.foreign_use.find(s.machine.agents[agent].kfd_node); it != s.foreign_use.end())
    used += it->second;
  return used < capacity ? capacity - used : 0;
}

}  // namespace umem::rocr_double

using namespace umem::rocr_double;

UMEM_DOUBLE_EXPORT hsa_status_t hsa_init() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count > 0 && getpid() != s.init_pid) return static_cast<hsa_status_t>(*unusable(s));  // a forked child
  if (s.init_count > 0) {
    ++s.init_count;
    log_call(s, "hsa_init -> SUCCESS refcount=" + std::to_string(s.init_count));
    return HSA_STATUS_SUCCESS;
  }
  // Test-only variables: the double is not part of umem, so it reads them directly.
  const char* snapshot = std::getenv("UMEM_ROCR_DOUBLE_SNAPSHOT");
  if (snapshot == nullptr || *snapshot == '\0') {
    log_call(s, "hsa_init -> OUT_OF_RESOURCES no snapshot (a node without /dev/kfd)");
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  const char* version = std::getenv("UMEM_ROCR_DOUBLE_VERSION");
  const std::string wanted =
      version != nullptr && *version != '\0' ? version : (built_with_vmem() ? "7.1" : "5.2.3");
  const auto rel = parse_release(wanted);
  if (!rel || (*rel == release::v5_2_3) == built_with_vmem()) {
    const std::string why =
        !rel ? "UMEM_ROCR_DOUBLE_VERSION='" + wanted + "' is not 5.2.3, 6.4 or 7.1"
             : "release " + wanted + " needs the double built " +
                   (built_with_vmem() ? "without" : "with") + " the VMM/dmabuf exports";
    log_call(s, "hsa_init -> ERROR " + why);
    std::fprintf(stderr, "rocr double: %s\n", why.c_str());
    return HSA_STATUS_ERROR;
  }
  try {
    s.machine = umem::load_snapshot(snapshot);
  } catch (const std::exception& e) {
    log_call(s, std::string("hsa_init -> ERROR snapshot: ") + e.what());
    std::fprintf(stderr, "rocr double: cannot load %s: %s\n", snapshot, e.what());
    return HSA_STATUS_ERROR;
  }
  s.version = *rel;
  s.init_count = 1;
  s.init_pid = static_cast<int>(getpid());
  log_call(s, "hsa_init -> SUCCESS release=" + wanted +
                  " agents=" + std::to_string(s.machine.agents.size()));
  return HSA_STATUS_SUCCESS;
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_shut_down() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (s.init_count == 0) {
    log_call(s, "hsa_shut_down -> NOT_INITIALIZED");
    return HSA_STATUS_ERROR_NOT_INITIALIZED;
  }
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);  // a forked child
  if (--s.init_count == 0) release_everything(s);
  log_call(s, "hsa_shut_down -> SUCCESS refcount=" + std::to_string(s.init_count));
  return HSA_STATUS_SUCCESS;
}

// Works without hsa_init, as in ROCr.
UMEM_DOUBLE_EXPORT hsa_status_t hsa_status_string(hsa_status_t status, const char** status_string) {
  const auto* e = find_status(status);
  if (status_string == nullptr || e == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *status_string = e->text;
  return HSA_STATUS_SUCCESS;
}

// The call log since the last reset. The pointer stays valid until the next call of this
// function or of umem_rocr_double_reset.
UMEM_DOUBLE_EXPORT const char* umem_rocr_double_call_log() {
  static std::string copy;
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  copy = s.log;
  return copy.c_str();
}

// Clears the call log. Allocations and handles are untouched: they belong to the runtime session.
UMEM_DOUBLE_EXPORT void umem_rocr_double_reset() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.log.clear();
}

// Counted faults (double_state.hpp): from now on the `n`th fault-able call answers
// HSA_STATUS_ERROR_OUT_OF_RESOURCES, and every later one too when `persistent`; 0 only counts.
// Counting starts again from 0; the last hsa_shut_down disarms it.
UMEM_DOUBLE_EXPORT void umem_rocr_double_fail_call(uint64_t n, int persistent) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.faults.arm(static_cast<std::size_t>(n), persistent != 0);
}

// Fault-able calls counted since umem_rocr_double_fail_call, and how many of them failed.
UMEM_DOUBLE_EXPORT uint64_t umem_rocr_double_fault_calls() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return s.faults.calls();
}

UMEM_DOUBLE_EXPORT uint64_t umem_rocr_double_faults_injected() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return s.faults.injected();
}

// The entry point of the first counted call that failed, "" before any; and
// "hsa_amd_vmem_map=4 ...", the counted calls by entry point. Each pointer stays valid until the
// next call of the same function.
UMEM_DOUBLE_EXPORT const char* umem_rocr_double_first_failed() {
  static std::string copy;
  state& s = the_state();
  return umem::test_doubles::text_of(s.mu, s.faults, copy,
                                     [](const auto& f) { return f.first_failed(); });
}

UMEM_DOUBLE_EXPORT const char* umem_rocr_double_fault_calls_by_entry() {
  static std::string copy;
  state& s = the_state();
  return umem::test_doubles::text_of(s.mu, s.faults, copy,
                                     [](const auto& f) { return f.by_entry(); });
}

// Locks (memory_lock, memory_lock_to_pool) not yet unlocked, a range locked twice counting twice,
// and pool allocations not yet freed.
UMEM_DOUBLE_EXPORT int umem_rocr_double_locks() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  int n = 0;
  for (const auto& [start, l] : s.locks) n += static_cast<int>(l.count);
  return n;
}

UMEM_DOUBLE_EXPORT int umem_rocr_double_pool_allocations() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return static_cast<int>(s.allocations.size());
}

namespace {

// The bytes of the ranges of `ranges` (locks or allocations, by start address), under the lock.
template <class Ranges>
std::uint64_t bytes_of(Ranges state::*ranges) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  std::uint64_t bytes = 0;
  for (const auto& [start, r] : s.*ranges) bytes += r.size;
  return bytes;
}

}  // namespace

// Bytes of the locked ranges (a range locked twice counting once), and of those pool allocations
// (as asked for).
UMEM_DOUBLE_EXPORT uint64_t umem_rocr_double_locked_bytes() { return bytes_of(&state::locks); }

UMEM_DOUBLE_EXPORT uint64_t umem_rocr_double_pool_allocated_bytes() {
  return bytes_of(&state::allocations);
}
