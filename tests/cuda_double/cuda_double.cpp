// The CUDA driver test double: a libcuda.so.1 stand-in serving a described machine.
//
// Note [What the CUDA double is]
// A shared library exporting the driver entry points umem's table uses (cuda_driver.hpp), loaded
// through UMEM_CUDA_DRIVER_LIB like the real driver. cuInit loads the topology snapshot named by
// UMEM_CUDA_DOUBLE_SNAPSHOT and serves its agents that carry cuda_device_info, in ordinal order
// (unset: a node without an NVIDIA GPU, cuInit answers CUDA_ERROR_NO_DEVICE). An attribute the
// snapshot leaves nullopt answers CUDA_ERROR_INVALID_VALUE, as a driver that does not know it,
// so discovery through the double rebuilds exactly the snapshot.
// Test-only knobs: UMEM_CUDA_DOUBLE_INIT_RESULT=<CUresult> makes cuInit fail with that code;
// UMEM_CUDA_DOUBLE_DEVICE_POINTER_OFFSET=<n> makes cuMemHostGetDevicePointer answer host + n (a
// device without CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM).
// Device memory: each device has the snapshot's total_memory_bytes (cuDeviceTotalMem) to give;
// cuMemAlloc beyond what is left answers CUDA_ERROR_OUT_OF_MEMORY, cuMemGetInfo answers what is
// left and the total, so a test sets the budget by describing the device. A "device pointer" is
// host memory (aligned_alloc), so tests may touch it; umem_cuda_double_device_bytes_in_use tells
// what is allocated. Whether a device is discrete or unified is the snapshot's attributes
// (PAGEABLE_MEMORY_ACCESS, INTEGRATED), as for the real driver.
// Virtual memory management (Note [Growable device segments] in cuda_device_source.hpp; built
// only with UMEM_CUDA_DOUBLE_WITH_VMM=1, the other build is a driver without those symbols): a
// reservation is a PROT_NONE anonymous mapping of host address space; cuMemCreate takes device
// memory from the same budget as cuMemAlloc; cuMemMap puts fresh inaccessible pages over the range
// and cuMemSetAccess makes them read/write, so tests may touch mapped memory and a touch of an
// unmapped range faults, as on the GPU. Unmapping drops the contents. VIRTUAL_MEMORY_MANAGEMENT_
// SUPPORTED answers 1 (as the H200 does) until umem_cuda_double_set_vmm_supported(0); the
// granularity is 2 MiB. umem_cuda_double_fail_next("cuMemMap", CUresult) makes the next call of
// that entry point (the VMM calls and cuMemHostRegister) fail with that code; umem_cuda_double_vmm_handles / _reservations count what
// is outstanding.
// Counted faults (counted_faults.hpp): umem_cuda_double_fail_call(N, persistent) makes the Nth
// fault-able call from then on (cuMemHostRegister, cuMemAlloc, cuMemAddressReserve, cuMemCreate,
// cuMemMap, cuMemSetAccess, each counted once it passes its argument checks) answer
// CUDA_ERROR_OUT_OF_MEMORY, once or from N on; umem_cuda_double_fault_calls counts them. With
// umem_cuda_double_registrations, _device_allocations and _vmm_mappings a test checks that
// nothing a failure interrupted is left behind.
// A forked child: every call that needs cuInit, cuInit included, made in a process other than the
// one whose cuInit succeeded answers CUDA_ERROR_NOT_INITIALIZED ("initialization error"), what a
// child of a process that initialized CUDA gets: the driver is initialized per process (driver
// API cuInit: "must be called before any other function from the driver API in the current
// process"), and CUDA's state does not survive fork() (PyTorch calls such a child a "bad fork",
// torch/csrc/cuda/Module.cpp).
// It is strict on purpose, to serve as a call checker: calls before cuInit, without a current
// context, with unknown flags, overlapping or unknown registrations and unknown events are
// rejected as the driver does; every memory and event call is written to a call log
// (umem_cuda_double_call_log). umem_cuda_double_hold_events(1) keeps recorded events pending
// until cuEventSynchronize, so tests can see query() answer "not yet".
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "counted_faults.hpp"
#include "umem/core/snapshot.hpp"
#include "umem/cuda_runtime/cuda_compat.hpp"
#include "umem/cuda_runtime/cuda_driver.hpp"
#include "support/host_pages.hpp"

#define UMEM_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace umem::cuda;
namespace cc = cuda_compat;
namespace res = cuda_compat::result;

struct registration {
  std::string id;  // "r1", "r2": stable names for the call log
  std::size_t size = 0;
  unsigned flags = 0;
};

struct device_allocation {
  std::string id;  // "d1", "d2"
  std::size_t size = 0;
  std::size_t device = 0;
};

struct vmm_handle {  // cuMemCreate
  std::string id;  // "h1", "h2"
  std::size_t size = 0;
  std::size_t device = 0;
  int mappings = 0;
  bool released = false;  // cuMemRelease came while mapped: freed at the last unmap
};

struct vmm_mapping {
  std::size_t size = 0;
  unsigned long long handle = 0;
};

struct vmm_reservation {  // cuMemAddressReserve
  std::string id;  // "a1", "a2"
  std::size_t size = 0;
  std::map<std::uintptr_t, vmm_mapping> mappings;  // by start address, disjoint
};

struct event_state {
  std::string id;
  bool pending = false;
};

struct state {
  std::mutex mu;
  bool initialised = false;
  int init_pid = 0;  // the process whose cuInit succeeded
  std::vector<umem::agent> devices;  // the snapshot's CUDA agents, by ordinal
  int driver_version = 13000;
  std::vector<int> retains;          // primary context retain count per device
  std::map<std::uintptr_t, registration> registrations;  // by start address
  std::map<std::uintptr_t, event_state> events;          // by handle value
  std::map<std::uintptr_t, device_allocation> device_memory;  // by device pointer
  std::vector<std::size_t> device_in_use;  // bytes of device memory allocated, per device
  std::map<std::uintptr_t, vmm_reservation> reservations;  // by base address
  std::map<unsigned long long, vmm_handle> handles;        // by handle value
  bool vmm_supported = true;
  std::map<std::string, cu_result> fail_next;  // entry point -> what its next call answers
  umem::test_doubles::counted_faults faults;   // umem_cuda_double_fail_call
  unsigned next_id = 1;
  bool hold_events = false;
  std::string log;
};

state& the_state() {
  static state s;
  return s;
}

// Initialised, and in the process that initialised it (not a forked child).
bool usable(const state& s) { return s.initialised && static_cast<int>(getpid()) == s.init_pid; }

thread_local cu_context current = nullptr;
thread_local int capture_mode = cc::stream_capture_mode::global;  // the driver's default

// Context handles: a tag above any pointer a test uses, plus the device ordinal.
constexpr std::uintptr_t kContextTag = 0xC7C70000u;
cu_context context_of(std::size_t device) {
  return reinterpret_cast<cu_context>(kContextTag + device);
}
std::optional<std::size_t> device_of(const state& s, cu_context ctx) {
  const auto v = reinterpret_cast<std::uintptr_t>(ctx);
  if (v < kContextTag || v - kContextTag >= s.devices.size()) return std::nullopt;
  return v - kContextTag;
}

void log_line(state& s, const std::string& line) { s.log += line + "\n"; }

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

const umem::agent* device(const state& s, cu_device dev) {
  if (!usable(s) || dev < 0 || static_cast<std::size_t>(dev) >= s.devices.size())
    return nullptr;
  return &s.devices[static_cast<std::size_t>(dev)];
}

// The current context, if it is a live primary context of this machine.
bool has_context(const state& s) {
  const auto d = device_of(s, current);
  return d && s.retains[*d] > 0;
}

std::optional<int> attribute_of(const umem::agent& a, int attr) {
  const umem::cuda_device_info& c = *a.cuda;
  const auto b = [](const std::optional<bool>& v) -> std::optional<int> {
    if (!v) return std::nullopt;
    return *v ? 1 : 0;
  };
  switch (attr) {
    case cc::attribute::multiprocessor_count: return static_cast<int>(a.compute_units);
    case cc::attribute::compute_capability_major: return static_cast<int>(c.cc_major);
    case cc::attribute::compute_capability_minor: return static_cast<int>(c.cc_minor);
    case cc::attribute::integrated: return b(c.integrated);
    case cc::attribute::can_map_host_memory: return b(c.can_map_host_memory);
    case cc::attribute::unified_addressing: return b(c.unified_addressing);
    case cc::attribute::managed_memory: return b(c.managed_memory);
    case cc::attribute::pageable_memory_access: return b(c.pageable_memory_access);
    case cc::attribute::concurrent_managed_access: return b(c.concurrent_managed_access);
    case cc::attribute::can_use_host_pointer_for_registered_mem:
      return b(c.can_use_host_pointer_for_registered_mem);
    case cc::attribute::host_register_supported: return b(c.host_register_supported);
    case cc::attribute::pageable_memory_access_uses_host_page_tables:
      return b(c.pageable_memory_access_uses_host_page_tables);
    case cc::attribute::direct_managed_mem_access_from_host:
      return b(c.direct_managed_mem_access_from_host);
    case cc::attribute::host_numa_id: return c.host_numa_id.value_or(-1);  // as CUDA >= 12.2
#if UMEM_CUDA_DOUBLE_WITH_VMM
    case cc::attribute::virtual_memory_management_supported:
      return the_state().vmm_supported ? 1 : 0;
#endif
    default: return std::nullopt;
  }
}

struct error_entry {
  int code;
  const char* name;
  const char* text;
};
constexpr error_entry kErrors[] = {
    {res::success, "CUDA_SUCCESS", "no error"},
    {res::invalid_value, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {res::out_of_memory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {res::not_initialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {res::no_device, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {res::invalid_device, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {res::invalid_context, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {res::invalid_handle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {res::not_ready, "CUDA_ERROR_NOT_READY", "device not ready"},
    {res::host_memory_already_registered, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {res::host_memory_not_registered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {res::not_supported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {res::unknown, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const error_entry* find_error(cu_result r) {
  for (const auto& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

// What a fault-able call of `call` answers instead of acting: the counted fault switch's
// out-of-memory, else what umem_cuda_double_fail_next set for it (once).
std::optional<cu_result> injected_failure(state& s, const char* call) {
  if (s.faults.fails(call)) {
    log_line(s, std::string("injected ") + call + " CUDA_ERROR_OUT_OF_MEMORY");
    return res::out_of_memory;
  }
  const auto it = s.fail_next.find(call);
  if (it == s.fail_next.end()) return std::nullopt;
  const cu_result r = it->second;
  s.fail_next.erase(it);
  return r;
}

}  // namespace

UMEM_DOUBLE_EXPORT cu_result cuInit(unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (flags != 0) return res::invalid_value;
  if (const char* forced = std::getenv("UMEM_CUDA_DOUBLE_INIT_RESULT")) return std::atoi(forced);
  if (s.initialised) return usable(s) ? res::success : res::not_initialized;
  const char* snapshot = std::getenv("UMEM_CUDA_DOUBLE_SNAPSHOT");
  if (snapshot == nullptr) return res::no_device;
  try {
    const umem::topology t = umem::load_snapshot(snapshot);
    for (const auto& a : t.agents)
      if (a.cuda) s.devices.push_back(a);
    if (t.cuda.driver_version) s.driver_version = *t.cuda.driver_version;
  } catch (const std::exception&) {
    return res::unknown;
  }
  if (s.devices.empty()) return res::no_device;
  s.retains.assign(s.devices.size(), 0);
  s.device_in_use.assign(s.devices.size(), 0);
  s.initialised = true;
  s.init_pid = static_cast<int>(getpid());
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDriverGetVersion(int* version) {
  if (version == nullptr) return res::invalid_value;
  state& s = the_state();
  std::lock_guard lock(s.mu);
  *version = s.driver_version;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuGetErrorName(cu_result r, const char** out) {
  const error_entry* e = find_error(r);
  if (out == nullptr || e == nullptr) return res::invalid_value;
  *out = e->name;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuGetErrorString(cu_result r, const char** out) {
  const error_entry* e = find_error(r);
  if (out == nullptr || e == nullptr) return res::invalid_value;
  *out = e->text;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGetCount(int* count) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (count == nullptr) return res::invalid_value;
  *count = static_cast<int>(s.devices.size());
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGet(cu_device* dev, int ordinal) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (dev == nullptr) return res::invalid_value;
  if (device(s, ordinal) == nullptr) return res::invalid_device;
  *dev = ordinal;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGetName(char* name, int len, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const umem::agent* a = device(s, dev);
  if (a == nullptr) return res::invalid_device;
  if (name == nullptr || len <= 0) return res::invalid_value;
  std::snprintf(name, static_cast<std::size_t>(len), "%s", a->marketing_name.c_str());
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGetAttribute(int* value, int attr, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const umem::agent* a = device(s, dev);
  if (a == nullptr) return res::invalid_device;
  const auto v = attribute_of(*a, attr);
  if (value == nullptr || !v) return res::invalid_value;
  *value = *v;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceTotalMem_v2(std::size_t* bytes, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const umem::agent* a = device(s, dev);
  if (a == nullptr) return res::invalid_device;
  if (bytes == nullptr) return res::invalid_value;
  *bytes = a->cuda->total_memory_bytes;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGetPCIBusId(char* out, int len, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const umem::agent* a = device(s, dev);
  if (a == nullptr) return res::invalid_device;
  if (out == nullptr || len < 13) return res::invalid_value;
  std::snprintf(out, static_cast<std::size_t>(len), "%04x:%02x:%02x.%x", a->pci_domain.value_or(0),
                a->bdfid >> 8, (a->bdfid >> 3) & 0x1f, a->bdfid & 7);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDeviceGetUuid_v2(cu_uuid* uuid, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const umem::agent* a = device(s, dev);
  if (a == nullptr) return res::invalid_device;
  if (uuid == nullptr) return res::invalid_value;
  // "GPU-" and 32 hex digits with dashes; a device described without one has none to give.
  std::string digits;
  for (char ch : a->uuid.substr(a->uuid.rfind('-') == std::string::npos ? 0 : 4))
    if (ch != '-') digits += ch;
  if (digits.size() != 32) return res::not_supported;
  for (std::size_t i = 0; i < 16; ++i)
    uuid->bytes[i] = static_cast<char>(std::stoul(digits.substr(2 * i, 2), nullptr, 16));
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDevicePrimaryCtxRetain(cu_context* ctx, cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (device(s, dev) == nullptr) return res::invalid_device;
  if (ctx == nullptr) return res::invalid_value;
  ++s.retains[static_cast<std::size_t>(dev)];
  *ctx = context_of(static_cast<std::size_t>(dev));
  log_line(s, "retain " + std::to_string(dev));
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuDevicePrimaryCtxRelease_v2(cu_device dev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (device(s, dev) == nullptr) return res::invalid_device;
  int& n = s.retains[static_cast<std::size_t>(dev)];
  if (n == 0) return res::invalid_context;  // released more often than retained
  --n;
  log_line(s, "release " + std::to_string(dev));
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuCtxGetCurrent(cu_context* ctx) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (ctx == nullptr) return res::invalid_value;
  *ctx = current;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuCtxSetCurrent(cu_context ctx) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (ctx != nullptr) {
    const auto d = device_of(s, ctx);
    if (!d || s.retains[*d] == 0) return res::invalid_context;
  }
  current = ctx;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuCtxSynchronize() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  log_line(s, "synchronize " + std::to_string(*device_of(s, current)));
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemGetInfo_v2(std::size_t* free_bytes, std::size_t* total) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  if (free_bytes == nullptr || total == nullptr) return res::invalid_value;
  const std::size_t d = *device_of(s, current);
  *total = s.devices[d].cuda->total_memory_bytes;
  *free_bytes = *total - s.device_in_use[d];
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemAlloc_v2(cu_deviceptr* out, std::size_t size) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  if (out == nullptr || size == 0) return res::invalid_value;
  if (auto r = injected_failure(s, "cuMemAlloc")) return *r;
  const std::size_t d = *device_of(s, current);
  if (size > s.devices[d].cuda->total_memory_bytes - s.device_in_use[d]) return res::out_of_memory;
  constexpr std::size_t page = 4096;
  void* p = std::aligned_alloc(page, (size + page - 1) / page * page);
  if (p == nullptr) return res::out_of_memory;
  device_allocation a{"d" + std::to_string(s.next_id++), size, d};
  log_line(s, "mem_alloc " + a.id + " " + std::to_string(size));
  s.device_in_use[d] += size;
  s.device_memory.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(a));
  *out = reinterpret_cast<std::uintptr_t>(p);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemFree_v2(cu_deviceptr p) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  const auto it = s.device_memory.find(static_cast<std::uintptr_t>(p));
  if (it == s.device_memory.end()) return res::invalid_value;  // not the start of an allocation
  log_line(s, "mem_free " + it->second.id);
  s.device_in_use[it->second.device] -= it->second.size;
  std::free(reinterpret_cast<void*>(it->first));
  s.device_memory.erase(it);
  return res::success;
}

#if UMEM_CUDA_DOUBLE_WITH_VMM
namespace {

constexpr std::size_t kVmmGranularity = std::size_t{2} << 20;
constexpr unsigned long long kHandleTag = 0x484Eull << 48;  // "HN": never a small integer

bool valid_location(const state& s, const cu_mem_location& l) {
  return l.type == cc::vmm::location_type_device && l.id >= 0 &&
         static_cast<std::size_t>(l.id) < s.devices.size();
}

bool valid_prop(const state& s, const cu_mem_allocation_prop* p) {
  return p != nullptr && p->type == cc::vmm::allocation_type_pinned &&
         p->requested_handle_types == cc::vmm::handle_type_none && valid_location(s, p->location);
}

// The reservation that holds all of [p, p + size), or end().
std::map<std::uintptr_t, vmm_reservation>::iterator reservation_of(state& s, std::uintptr_t p,
                                                                   std::size_t size) {
  auto it = s.reservations.upper_bound(p);
  if (it == s.reservations.begin()) return s.reservations.end();
  --it;
  return p - it->first <= it->second.size && size <= it->second.size - (p - it->first)
             ? it
             : s.reservations.end();
}

// "a3+2097152": a place in a reservation, for the call log.
std::string where(const vmm_reservation& r, std::uintptr_t base, std::uintptr_t p) {
  return r.id + "+" + std::to_string(p - base);
}

// Fresh pages with `prot` over [p, p + size): what was there is gone.
bool replace_pages(std::uintptr_t p, std::size_t size, int prot) {
  return mmap(reinterpret_cast<void*>(p), size, prot,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED;
}

}  // namespace

UMEM_DOUBLE_EXPORT cu_result cuMemGetAllocationGranularity(std::size_t* granularity,
                                                           const cu_mem_allocation_prop* prop,
                                                           int option) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (granularity == nullptr || !valid_prop(s, prop) || option < 0 || option > 1)
    return res::invalid_value;
  *granularity = kVmmGranularity;  // minimum and recommended alike, as on the H200
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemAddressReserve(cu_deviceptr* out, std::size_t size,
                                                 std::size_t alignment, cu_deviceptr addr,
                                                 unsigned long long flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (out == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0 || addr != 0 ||
      (alignment & (alignment - 1)) != 0)
    return res::invalid_value;
  if (auto r = injected_failure(s, "cuMemAddressReserve")) return *r;
  const std::size_t align = std::max(alignment, kVmmGranularity);
  const std::size_t span = size + align;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return res::out_of_memory;
  const auto b = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (b + align - 1) / align * align;
  if (start > b) munmap(raw, start - b);
  munmap(reinterpret_cast<void*>(start + size), b + span - start - size);
  vmm_reservation r{"a" + std::to_string(s.next_id++), size, {}};
  log_line(s, "address_reserve " + r.id + " " + std::to_string(size));
  s.reservations.emplace(start, std::move(r));
  *out = start;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemAddressFree(cu_deviceptr p, std::size_t size) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.reservations.find(static_cast<std::uintptr_t>(p));
  // The whole reservation, with nothing mapped in it any more.
  if (it == s.reservations.end() || it->second.size != size || !it->second.mappings.empty())
    return res::invalid_value;
  log_line(s, "address_free " + it->second.id);
  munmap(reinterpret_cast<void*>(it->first), size);
  s.reservations.erase(it);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemCreate(unsigned long long* handle, std::size_t size,
                                         const cu_mem_allocation_prop* prop,
                                         unsigned long long flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (handle == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0 ||
      !valid_prop(s, prop))
    return res::invalid_value;
  if (auto r = injected_failure(s, "cuMemCreate")) return *r;
  const auto d = static_cast<std::size_t>(prop->location.id);
  if (size > s.devices[d].cuda->total_memory_bytes - s.device_in_use[d]) return res::out_of_memory;
  const unsigned id = s.next_id++;
  vmm_handle h{"h" + std::to_string(id), size, d, 0, false};
  log_line(s, "mem_create " + h.id + " " + std::to_string(size));
  s.device_in_use[d] += size;
  s.handles.emplace(kHandleTag + id, std::move(h));
  *handle = kHandleTag + id;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemRelease(unsigned long long handle) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.handles.find(handle);
  if (it == s.handles.end() || it->second.released) return res::invalid_value;
  log_line(s, "mem_release " + it->second.id);
  it->second.released = true;
  if (it->second.mappings == 0) {
    s.device_in_use[it->second.device] -= it->second.size;
    s.handles.erase(it);
  }
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemMap(cu_deviceptr p, std::size_t size, std::size_t offset,
                                      unsigned long long handle, unsigned long long flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto a = static_cast<std::uintptr_t>(p);
  const auto h = s.handles.find(handle);
  const auto r = reservation_of(s, a, size);
  if (h == s.handles.end() || h->second.released) return res::invalid_handle;
  if (size == 0 || flags != 0 || a % kVmmGranularity != 0 || size % kVmmGranularity != 0 ||
      offset != 0 || size > h->second.size || r == s.reservations.end())
    return res::invalid_value;
  for (const auto& [start, m] : r->second.mappings)
    if (a < start + m.size && start < a + size) return res::invalid_value;  // already mapped
  if (auto failed = injected_failure(s, "cuMemMap")) return *failed;
  if (!replace_pages(a, size, PROT_NONE)) return res::out_of_memory;
  log_line(s, "mem_map " + where(r->second, r->first, a) + " " + std::to_string(size) + " " +
                  h->second.id);
  r->second.mappings.emplace(a, vmm_mapping{size, handle});
  ++h->second.mappings;
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemUnmap(cu_deviceptr p, std::size_t size) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto a = static_cast<std::uintptr_t>(p);
  const auto r = reservation_of(s, a, size);
  if (size == 0 || r == s.reservations.end()) return res::invalid_value;
  // Whole mappings only, back to back from `a` to `a + size`.
  auto& mappings = r->second.mappings;
  auto first = mappings.find(a);
  auto last = first;
  for (std::uintptr_t at = a; at != a + size; ++last) {
    if (last == mappings.end() || last->first != at || last->second.size > a + size - at)
      return res::invalid_value;
    at += last->second.size;
  }
  log_line(s, "mem_unmap " + where(r->second, r->first, a) + " " + std::to_string(size));
  replace_pages(a, size, PROT_NONE);
  for (auto it = first; it != last; ++it) {
    const auto h = s.handles.find(it->second.handle);
    if (--h->second.mappings == 0 && h->second.released) {
      s.device_in_use[h->second.device] -= h->second.size;
      s.handles.erase(h);
    }
  }
  mappings.erase(first, last);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemSetAccess(cu_deviceptr p, std::size_t size,
                                            const cu_mem_access_desc* desc, std::size_t count) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto a = static_cast<std::uintptr_t>(p);
  const auto r = reservation_of(s, a, size);
  if (desc == nullptr || count != 1 || size == 0 || r == s.reservations.end() ||
      !valid_location(s, desc->location) ||
      (desc->flags != 0 && desc->flags != 1 && desc->flags != cc::vmm::access_read_write))
    return res::invalid_value;
  // Every byte of the range must be mapped.
  std::uintptr_t at = a;
  for (const auto& [start, m] : r->second.mappings)
    if (start <= at && at < start + m.size) at = start + m.size;
  if (at < a + size) return res::invalid_value;
  if (auto failed = injected_failure(s, "cuMemSetAccess")) return *failed;
  const int prot = desc->flags == cc::vmm::access_read_write ? PROT_READ | PROT_WRITE
                   : desc->flags == 1                      ? PROT_READ
                                                           : PROT_NONE;
  if (mprotect(reinterpret_cast<void*>(a), size, prot) != 0) return res::unknown;
  log_line(s, "set_access " + where(r->second, r->first, a) + " " + std::to_string(size) + " " +
                  hex(static_cast<unsigned>(desc->flags)));
  return res::success;
}
#endif  // UMEM_CUDA_DOUBLE_WITH_VMM

UMEM_DOUBLE_EXPORT cu_result cuThreadExchangeStreamCaptureMode(int* mode) {
  if (mode == nullptr || *mode < cc::stream_capture_mode::global ||
      *mode > cc::stream_capture_mode::relaxed)
    return res::invalid_value;
  std::swap(*mode, capture_mode);
  return res::success;
}

// Registration pins the pages. What the driver refuses with CUDA_ERROR_INVALID_VALUE, as an H100
// (driver of CUDA 13, Linux 6.18) answered on 2026-12-06: a range with unmapped pages; read-only
// pages without CU_MEMHOSTREGISTER_READ_ONLY (the driver API's documentation of that flag: it is
// required to register memory mapped read-only where the GPU does not use the host's page
// tables); a shared mapping of a file outside tmpfs (an ext4 file; /dev/shm, memfd and private
// file mappings registered), which the kernel refuses to pin long-term for writing (mm/gup.c:
// FOLL_LONGTERM pins of file mappings that need dirty tracking). Byte ranges that overlap a
// registration are CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; ranges that share only a page
// register (observed likewise).
UMEM_DOUBLE_EXPORT cu_result cuMemHostRegister_v2(void* p, std::size_t size, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  if (p == nullptr || size == 0 || (flags & ~0xFu) != 0) return res::invalid_value;
  for (const auto& d : s.devices)
    if (d.cuda->host_register_supported == false) return res::not_supported;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& [base, r] : s.registrations)
    if (start < base + r.size && base < start + size) return res::host_memory_already_registered;
  const umem::test::host_pages pages = umem::test::inspect_host_pages(start, size);
  if (!pages.mapped || pages.shared_file ||
      (!pages.writable && (flags & cc::host_register::read_only) == 0))
    return res::invalid_value;
  if (const auto failed = injected_failure(s, "cuMemHostRegister")) return *failed;
  registration r{"r" + std::to_string(s.next_id++), size, flags};
  log_line(s, "register " + r.id + " " + std::to_string(size) + " " + hex(flags));
  s.registrations.emplace(start, std::move(r));
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemHostUnregister(void* p) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  const auto it = s.registrations.find(addr);
  if (it == s.registrations.end()) {
    // An address inside a registration is invalid, any other not registered (observed: H100).
    for (const auto& [base, r] : s.registrations)
      if (base < addr && addr < base + r.size) return res::invalid_value;
    return res::host_memory_not_registered;
  }
  log_line(s, "unregister " + it->second.id);
  s.registrations.erase(it);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuMemHostGetDevicePointer_v2(cu_deviceptr* out, void* p,
                                                          unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  if (out == nullptr || flags != 0) return res::invalid_value;
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  for (const auto& [base, r] : s.registrations) {
    if (addr < base || addr >= base + r.size) continue;
    if ((r.flags & cc::host_register::devicemap) == 0) return res::invalid_value;
    const char* offset = std::getenv("UMEM_CUDA_DOUBLE_DEVICE_POINTER_OFFSET");
    *out = addr + (offset != nullptr ? std::strtoull(offset, nullptr, 0) : 0);
    log_line(s, "device_pointer " + r.id);
    return res::success;
  }
  return res::invalid_value;
}

UMEM_DOUBLE_EXPORT cu_result cuEventCreate(cu_event* ev, unsigned int flags) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (!has_context(s)) return res::invalid_context;
  if (ev == nullptr || (flags & ~0xFu) != 0) return res::invalid_value;
  event_state e{"e" + std::to_string(s.next_id++), false};
  // A heap cell gives each event a unique, never-reused handle value for the double's life.
  const auto handle = reinterpret_cast<std::uintptr_t>(new char);
  log_line(s, "event_create " + e.id + " " + hex(flags));
  s.events.emplace(handle, std::move(e));
  *ev = reinterpret_cast<cu_event>(handle);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuEventRecord(cu_event ev, cu_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.events.find(reinterpret_cast<std::uintptr_t>(ev));
  if (it == s.events.end() || stream != nullptr) return res::invalid_handle;  // no streams here
  it->second.pending = s.hold_events;
  log_line(s, "event_record " + it->second.id);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuEventQuery(cu_event ev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.events.find(reinterpret_cast<std::uintptr_t>(ev));
  if (it == s.events.end()) return res::invalid_handle;
  log_line(s, "event_query " + it->second.id);
  return it->second.pending ? res::not_ready : res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuEventSynchronize(cu_event ev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.events.find(reinterpret_cast<std::uintptr_t>(ev));
  if (it == s.events.end()) return res::invalid_handle;
  it->second.pending = false;
  log_line(s, "event_synchronize " + it->second.id);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuEventDestroy_v2(cu_event ev) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  const auto it = s.events.find(reinterpret_cast<std::uintptr_t>(ev));
  if (it == s.events.end()) return res::invalid_handle;
  log_line(s, "event_destroy " + it->second.id);
  delete reinterpret_cast<char*>(it->first);
  s.events.erase(it);
  return res::success;
}

UMEM_DOUBLE_EXPORT cu_result cuStreamSynchronize(cu_stream stream) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (!usable(s)) return res::not_initialized;
  if (stream != nullptr) return res::invalid_handle;
  return res::success;
}

// Test controls.
UMEM_DOUBLE_EXPORT const char* umem_cuda_double_call_log() {
  static std::string copy;
  state& s = the_state();
  std::lock_guard lock(s.mu);
  copy = s.log;
  return copy.c_str();
}

// Forgets the machine, every registration, event and the log; the next cuInit reloads.
UMEM_DOUBLE_EXPORT void umem_cuda_double_reset() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  for (const auto& [handle, e] : s.events) delete reinterpret_cast<char*>(handle);
  for (const auto& [p, a] : s.device_memory) std::free(reinterpret_cast<void*>(p));
  s.device_memory.clear();
  for (const auto& [base, r] : s.reservations) munmap(reinterpret_cast<void*>(base), r.size);
  s.reservations.clear();
  s.handles.clear();
  s.vmm_supported = true;
  s.fail_next.clear();
  s.faults.arm(0, false);
  s.device_in_use.clear();
  s.initialised = false;
  s.devices.clear();
  s.driver_version = 13000;
  s.retains.clear();
  s.registrations.clear();
  s.events.clear();
  s.next_id = 1;
  s.hold_events = false;
  s.log.clear();
  current = nullptr;
  capture_mode = cc::stream_capture_mode::global;
}

UMEM_DOUBLE_EXPORT void umem_cuda_double_hold_events(int hold) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.hold_events = hold != 0;
}

// Live primary-context retains on `device` (the test checks umem releases what it retains).
UMEM_DOUBLE_EXPORT int umem_cuda_double_retains(int device) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (device < 0 || static_cast<std::size_t>(device) >= s.retains.size()) return -1;
  return s.retains[static_cast<std::size_t>(device)];
}

// Bytes of device memory allocated on `device` (cuMemAlloc and cuMemCreate, less what was freed
// and released), -1 for no device.
UMEM_DOUBLE_EXPORT long long umem_cuda_double_device_bytes_in_use(int device) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  if (device < 0 || static_cast<std::size_t>(device) >= s.device_in_use.size()) return -1;
  return static_cast<long long>(s.device_in_use[static_cast<std::size_t>(device)]);
}

// VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED of every device (1 until set to 0).
UMEM_DOUBLE_EXPORT void umem_cuda_double_set_vmm_supported(int supported) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.vmm_supported = supported != 0;
}

// The next call of `call` ("cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemAddressReserve",
// "cuMemHostRegister", "cuMemAlloc")
// answers `result` after its checks of the arguments, doing nothing; later calls behave again.
UMEM_DOUBLE_EXPORT void umem_cuda_double_fail_next(const char* call, int result) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.fail_next[call] = result;
}

// cuMemCreate handles not yet released (or released but still mapped).
UMEM_DOUBLE_EXPORT int umem_cuda_double_vmm_handles() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.handles.size());
}

// cuMemAddressReserve reservations not yet freed.
UMEM_DOUBLE_EXPORT int umem_cuda_double_vmm_reservations() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.reservations.size());
}

// Counted faults (counted_faults.hpp): from now on the `n`th fault-able call fails with
// CUDA_ERROR_OUT_OF_MEMORY, and every later one too when `persistent`; 0 only counts. Counting
// starts again from 0.
UMEM_DOUBLE_EXPORT void umem_cuda_double_fail_call(unsigned long long n, int persistent) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.faults.arm(static_cast<std::size_t>(n), persistent != 0);
}

// Fault-able calls counted since umem_cuda_double_fail_call, and how many of them failed.
UMEM_DOUBLE_EXPORT unsigned long long umem_cuda_double_fault_calls() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.faults.calls();
}

UMEM_DOUBLE_EXPORT unsigned long long umem_cuda_double_faults_injected() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return s.faults.injected();
}

// The entry point of the first counted call that failed ("cuMemMap"), "" before any; and
// "cuMemAlloc=3 cuMemMap=12 ...", the counted calls by entry point. Each pointer stays valid
// until the next call of the same function.
UMEM_DOUBLE_EXPORT const char* umem_cuda_double_first_failed() {
  static std::string copy;
  state& s = the_state();
  return umem::test_doubles::text_of(s.mu, s.faults, copy,
                                     [](const auto& f) { return f.first_failed(); });
}

UMEM_DOUBLE_EXPORT const char* umem_cuda_double_fault_calls_by_entry() {
  static std::string copy;
  state& s = the_state();
  return umem::test_doubles::text_of(s.mu, s.faults, copy,
                                     [](const auto& f) { return f.by_entry(); });
}

// cuMemHostRegister registrations not yet unregistered, and their bytes.
UMEM_DOUBLE_EXPORT int umem_cuda_double_registrations() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.registrations.size());
}

UMEM_DOUBLE_EXPORT unsigned long long umem_cuda_double_registered_bytes() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  unsigned long long bytes = 0;
  for (const auto& [base, r] : s.registrations) bytes += r.size;
  return bytes;
}

// cuMemAlloc allocations not yet freed.
UMEM_DOUBLE_EXPORT int umem_cuda_double_device_allocations() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  return static_cast<int>(s.device_memory.size());
}

// cuMemMap mappings not yet unmapped, over every reservation.
UMEM_DOUBLE_EXPORT int umem_cuda_double_vmm_mappings() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  std::size_t n = 0;
  for (const auto& [base, r] : s.reservations) n += r.mappings.size();
  return static_cast<int>(n);
}

// Empties the call log only (umem_cuda_double_reset forgets the machine too): a long test keeps
// the log from growing without bound.
UMEM_DOUBLE_EXPORT void umem_cuda_double_clear_log() {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  s.log.clear();
}
