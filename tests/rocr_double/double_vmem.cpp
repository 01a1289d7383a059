// VMM and dmabuf entry points (ROCr >= 6.0 / 5.6): only in the 6.4/7.1 build of the double.
// Reservations are PROT_NONE anonymous mappings; a map makes the range a fresh anonymous mapping
// that becomes read/write once set_access grants an agent access, as ROCr requires. A handle is
// memory of its pool's agent: it counts in MEMORY_AVAIL, and handle_create answers
// OUT_OF_RESOURCES when the agent has less left. The log names handles "vN" and mapped ranges
// by their offset in the reservation ("+2097152"). Test controls at the end: injected failures
// and counts of what is outstanding.
// Debian's 5.2.3 headers do not declare these functions, so the types are declared here with
// the layouts of ROCr's 2025 headers.
#include <hsa/hsa.h>
#include <sys/mman.h>
#include <unistd.h>

#include <optional>

#include "double_state.hpp"
#include "umem/hsa_runtime/rocr_compat.hpp"

using namespace umem::rocr_double;
namespace rc = umem::hsa::rocr_compat;

namespace {

struct pool_t {
  std::uint64_t handle;
};  // hsa_amd_memory_pool_t
struct vmem_handle_t {
  std::uint64_t handle;
};                      // hsa_amd_vmem_alloc_handle_t
struct access_desc_t {  // hsa_amd_memory_access_desc_t
  std::uint32_t permissions;
  hsa_agent_t agent_handle;
};

constexpr std::uint64_t kVmemTag = 0x564Dull << 48;  // "VM"

hsa_status_t finish(state& s, const std::string& call, hsa_status_t st) {
  log_call(s, call + " -> " + status_name(st));
  return st;
}

// The status injected for this call of `entry` ("hsa_amd_vmem_map", logged as `name`,
// "vmem_map"): the counted fault switch's, else umem_rocr_double_fail_next_vmem's, consumed.
std::optional<hsa_status_t> injected(state& s, const char* name, const char* entry) {
  if (counted_failure(s, entry)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const auto it = s.fail_next_vmem.find(name);
  if (it == s.fail_next_vmem.end()) return std::nullopt;
  const auto st = static_cast<hsa_status_t>(it->second);
  s.fail_next_vmem.erase(it);
  return st;
}

std::string handle_name(std::uint64_t handle) {
  return "v" + std::to_string(handle & ~kVmemTag);
}

// The reservation holding [p, p+size), or end().
auto find_reservation(state& s, std::uintptr_t p, std::size_t size) {
  auto it = s.reservations.upper_bound(p);
  if (it == s.reservations.begin()) return s.reservations.end();
  --it;
  return p + size <= it->first + it->second ? it : s.reservations.end();
}

hsa_status_t reserve(state& s, const char* entry, const std::string& call, void** ptr,
                     std::size_t size, std::uint64_t address, std::uint64_t alignment) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  if (ptr == nullptr || size == 0 || size % page != 0 || (alignment & (alignment - 1)) != 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (const auto st = injected(s, "vmem_address_reserve", entry))
    return finish(s, call + " (injected)", *st);
  const std::size_t align = alignment > page ? alignment : page;
  const std::size_t span = size + align - page;
  void* base = mmap(reinterpret_cast<void*>(address), span, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t start = (b + align - 1) / align * align;
  if (start > b) munmap(base, start - b);
  if (start + size < b + span)
    munmap(reinterpret_cast<void*>(start + size), b + span - start - size);
  s.reservations[start] = size;
  *ptr = reinterpret_cast<void*>(start);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

}  // namespace

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_address_reserve(void** ptr, size_t size,
                                                             uint64_t address, uint64_t flags) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  return reserve(
      s, "hsa_amd_vmem_address_reserve",
      "vmem_address_reserve size=" + std::to_string(size) + " flags=" + std::to_string(flags),
      ptr, size, address, 0);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_address_reserve_align(void** ptr, size_t size,
                                                                   uint64_t address,
                                                                   uint64_t alignment,
                                                                   uint64_t flags) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  return reserve(s, "hsa_amd_vmem_address_reserve_align",
                 "vmem_address_reserve_align size=" + std::to_string(size) +
                     " alignment=" + std::to_string(alignment) + " flags=" + std::to_string(flags),
                 ptr, size, address, alignment);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_address_free(void* ptr, size_t size) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "vmem_address_free size=" + std::to_string(size);
  const auto start = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = s.reservations.find(start);
  if (it == s.reservations.end() || it->second != size)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  auto m = s.mappings.lower_bound(start);
  if (m != s.mappings.end() && m->first < start + size)
    return finish(s, call + " (still mapped)", HSA_STATUS_ERROR_INVALID_ARGUMENT);
  munmap(ptr, size);
  s.reservations.erase(it);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_handle_create(pool_t pool, size_t size, uint32_t type,
                                                           uint64_t flags, vmem_handle_t* handle) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto d = decode_pool(s, pool.handle);
  const std::string call = "vmem_handle_create size=" + std::to_string(size) +
                           " type=" + std::to_string(type) + " flags=" + std::to_string(flags);
  if (!d) return finish(s, call, static_cast<hsa_status_t>(rc::status::invalid_memory_pool));
  const auto& p = s.machine.agents[d->first].pools[d->second];
  const std::size_t granule = p.alloc_granule != 0 ? p.alloc_granule : 4096;
  if (handle == nullptr || size == 0 || size % granule != 0 || type > 1 || !p.alloc_allowed)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (const auto st = injected(s, "vmem_handle_create", "hsa_amd_vmem_handle_create"))
    return finish(s, call + " (injected)", *st);
  if (size > agent_memory_avail(s, d->first))
    return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  handle->handle = kVmemTag | s.next_id++;
  s.vmem_handles[handle->handle] = {size, d->first};
  log_call(s, call + " -> SUCCESS " + handle_name(handle->handle));
  return HSA_STATUS_SUCCESS;
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_handle_release(vmem_handle_t handle) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call = "vmem_handle_release " + handle_name(handle.handle);
  if (s.vmem_handles.erase(handle.handle) == 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                                                 vmem_handle_t handle, uint64_t flags) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto start = reinterpret_cast<std::uintptr_t>(va);
  const auto r = find_reservation(s, start, size);
  const std::string call =
      "vmem_map " + (r == s.reservations.end() ? "?" : "+" + std::to_string(start - r->first)) +
      " size=" + std::to_string(size) + " offset=" + std::to_string(in_offset) + " " +
      handle_name(handle.handle) + " flags=" + std::to_string(flags);
  auto h = s.vmem_handles.find(handle.handle);
  if (h == s.vmem_handles.end() || va == nullptr || size == 0 ||
      in_offset + size > h->second.first || r == s.reservations.end())
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  auto m = s.mappings.upper_bound(start);
  const bool overlaps_next = m != s.mappings.end() && m->first < start + size;
  const bool overlaps_prev =
      m != s.mappings.begin() && std::prev(m)->first + std::prev(m)->second.first > start;
  if (overlaps_next || overlaps_prev)
    return finish(s, call + " (already mapped)", HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (const auto st = injected(s, "vmem_map", "hsa_amd_vmem_map"))
    return finish(s, call + " (injected)", *st);
  if (mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
      MAP_FAILED)
    return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  s.mappings[start] = {size, handle.handle};
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto start = reinterpret_cast<std::uintptr_t>(va);
  const auto r = find_reservation(s, start, size);
  const std::string call =
      "vmem_unmap " + (r == s.reservations.end() ? "?" : "+" + std::to_string(start - r->first)) +
      " size=" + std::to_string(size);
  auto m = s.mappings.find(start);
  if (m == s.mappings.end() || m->second.first != size)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  mmap(va, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  s.mappings.erase(m);
  s.access.erase(start);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_set_access(void* va, size_t size,
                                                        const access_desc_t* desc,
                                                        size_t desc_cnt) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  std::string call = "vmem_set_access size=" + std::to_string(size);
  const auto start = reinterpret_cast<std::uintptr_t>(va);
  auto m = s.mappings.find(start);
  if (m == s.mappings.end() || m->second.first != size || desc == nullptr || desc_cnt == 0)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  if (const auto st = injected(s, "vmem_set_access", "hsa_amd_vmem_set_access"))
    return finish(s, call + " (injected)", *st);
  bool any = false;
  for (std::size_t i = 0; i < desc_cnt; ++i) {
    const auto agent = decode_agent(s, desc[i].agent_handle.handle);
    if (!agent) return finish(s, call, HSA_STATUS_ERROR_INVALID_AGENT);
    if (desc[i].permissions > rc::access_permission::rw)
      return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
    call += " node" + std::to_string(s.machine.agents[*agent].kfd_node) + "=" +
            std::to_string(desc[i].permissions);
  }
  for (std::size_t i = 0; i < desc_cnt; ++i) {
    s.access[start][*decode_agent(s, desc[i].agent_handle.handle)] = desc[i].permissions;
    any = any || desc[i].permissions != rc::access_permission::none;
  }
  mprotect(va, size, any ? PROT_READ | PROT_WRITE : PROT_NONE);
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_vmem_get_access(void* va, uint32_t* perms,
                                                        hsa_agent_t agent) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const auto index = decode_agent(s, agent.handle);
  if (!index) return HSA_STATUS_ERROR_INVALID_AGENT;
  auto m = s.mappings.find(reinterpret_cast<std::uintptr_t>(va));
  if (m == s.mappings.end() || perms == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *perms = rc::access_permission::none;
  if (auto a = s.access.find(m->first); a != s.access.end())
    if (auto p = a->second.find(*index); p != a->second.end()) *perms = p->second;
  return HSA_STATUS_SUCCESS;
}

// The "dmabuf" is a memfd: a real descriptor the caller can close, carrying no memory.
UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_portable_export_dmabuf(const void* ptr, size_t size,
                                                               int* dmabuf, uint64_t* offset) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  const std::string call =
      "export_dmabuf " + name_pointer(s, ptr) + " size=" + std::to_string(size);
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = s.allocations.upper_bound(addr);
  if (dmabuf == nullptr || offset == nullptr || size == 0 || it == s.allocations.begin() ||
      addr + size > std::prev(it)->first + std::prev(it)->second.size)
    return finish(s, call, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const int fd = memfd_create("umem-rocr-double-dmabuf", MFD_CLOEXEC);
  if (fd < 0) return finish(s, call, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  s.dmabufs.insert(fd);
  *dmabuf = fd;
  *offset = addr - std::prev(it)->first;
  return finish(s, call, HSA_STATUS_SUCCESS);
}

UMEM_DOUBLE_EXPORT hsa_status_t hsa_amd_portable_close_dmabuf(int dmabuf) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  if (const auto st = unusable(s)) return static_cast<hsa_status_t>(*st);
  if (s.dmabufs.erase(dmabuf) == 0)
    return finish(s, "close_dmabuf", HSA_STATUS_ERROR_INVALID_ARGUMENT);
  close(dmabuf);
  return finish(s, "close_dmabuf", HSA_STATUS_SUCCESS);
}

// Test control: the next call of VMM entry point `call` ("vmem_address_reserve" for both reserve
// calls, "vmem_handle_create", "vmem_map", "vmem_set_access") that gets past its argument checks
// answers `status` and does nothing.
UMEM_DOUBLE_EXPORT void umem_rocr_double_fail_next_vmem(const char* call, uint32_t status) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  s.fail_next_vmem[call] = status;
}

// Test controls: what is outstanding now (reservations not freed, handles not released, ranges
// not unmapped), and the bytes of the handles of the agent of KFD node `kfd_node`.
UMEM_DOUBLE_EXPORT int umem_rocr_double_vmem_reservations() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return static_cast<int>(s.reservations.size());
}

UMEM_DOUBLE_EXPORT int umem_rocr_double_vmem_handles() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return static_cast<int>(s.vmem_handles.size());
}

UMEM_DOUBLE_EXPORT int umem_rocr_double_vmem_mappings() {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  return static_cast<int>(s.mappings.size());
}

UMEM_DOUBLE_EXPORT uint64_t umem_rocr_double_vmem_handle_bytes(uint32_t kfd_node) {
  state& s = the_state();
  std::lock_guard<std::mutex> guard(s.mu);
  std::uint64_t bytes = 0;
  for (const auto& [handle, h] : s.vmem_handles)
    if (s.machine.agents[h.second].kfd_node == kfd_node) bytes += h.first;
  return bytes;
}
