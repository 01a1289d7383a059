// The HIP double's state: devices, events and busy streams, HIP's registry of memory objects, the
// attached ROCr, and what tests read (counts of calls and attempts, injected failures).
//
// Note [What the HIP double is]
// A shared library exporting the HIP entry points umem uses (a libamdhip64 stand-in). umem never
// loads HIP itself, so a test maps the double first (dlopen / ctypes.CDLL with RTLD_GLOBAL, as
// PyTorch for ROCm maps libamdhip64) and points UMEM_HIP_RUNTIME_LIB at it. It is strict on
// purpose, to serve as a call checker: it is as strict as HIP on ROCm (clr) and never more lenient;
// every rule it models names the clr source it comes from.
//
// Events (double_events.cpp). It serves umem_hip_double_reset(n) devices (1 until a test says
// otherwise); the current device is per-thread, as in HIP. A stream made busy by
// umem_hip_double_pending(stream) keeps every event recorded on it from then on not ready
// (hipEventQuery answers hipErrorNotReady) until umem_hip_double_complete(stream),
// umem_hip_double_complete_all(), hipStreamSynchronize(stream) or a synchronisation of the
// event's device; hipEventSynchronize lets the GPU reach that one event. Events recorded on an
// idle stream complete at once. Unknown events and flags, devices out of range, and a null-stream
// record from a device other than the event's are rejected as HIP does. The double makes no
// streams: any pointer is taken as a stream (HIP would reject one it did not make).
//
// Memory (double_memory.cpp, double_transfer.cpp, double_pointer.cpp). HIP runs over ROCr, so the
// double does too: umem_hip_double_attach_rocr(path) maps the libhsa-runtime64 at `path` (the ROCr
// double, which umem maps from the same path, so both share its state), calls hsa_init, and serves
// one HIP device per GPU agent, in ROCr's order (clr rocdevice.cpp iterateAgentCallback fills
// gpu_agents_ in hsa_iterate_agents order). Unattached, a memory entry point attaches the library
// UMEM_HIP_DOUBLE_ROCR names, else answers hipErrorNoDevice; the events-only use stays as it was.
// Memory is real: hipMalloc, hipHostMalloc and hipMallocManaged allocate through ROCr's
// hsa_amd_memory_pool_allocate (the ROCr double hands out host memory), hipHostRegister locks
// through hsa_amd_memory_lock_to_pool once per device, fills and copies write the bytes. Which
// pointers HIP accepts follows clr exactly (Note [Which pointers HIP knows] in double_objects.hpp).
// The rules, by source (ROCm/clr f9f995c6 unless the 2026 tree, ROCm/rocm-systems projects/clr,
// is named; each entry point's comment has the details):
// - Known means an object of amd::MemObjMap (FindMemObj: nearest key at or below, within its
//   size) or else the arena (rocdevice.cpp GetArenaMemObj/IsValidAllocation: every ROCr pointer
//   type but LOCKED, UNKNOWN and, 2026, RESERVED_ADDR; no size bound). Memory locked by ROCr
//   alone and malloc memory are unknown; hipHostRegister'd and HIP-allocated memory are objects;
//   ROCr pool allocations are the arena.
// - hipMemset(Async) (ihipMemset_validate): size 0 succeeds; null, unknown, or past the object's
//   end is hipErrorInvalidValue.
// - hipMemcpy(Async) (ihipMemcpy_validate, IsHtoHMemcpyValid, ihipMemcpy): size 0 succeeds
//   (hipMemcpyAsync checks the kind first); null is invalid; a kind past Default but
//   DeviceToDeviceNoCU is hipErrorInvalidMemcpyDirection; known sides are size-checked; two
//   unknown sides are hipErrorInvalidValue unless hmmCpuMemoryAccessible_
//   (HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT) or the kind is HostToHost/Default, and are
//   then copied on the CPU after stream.finish() (counted: umem_hip_double_cpu_copies).
// - hipHostRegister (ihipHostRegister, rocmemory.cpp roc::Buffer::create, platform/memory.cpp
//   Memory::create): flags within Portable|Mapped|IoMemory|ExtCoarseGrained|ExtUncached (2026;
//   f9f995c6: "flags > 15"); one lock per device with that device's GPU agent to its
//   SystemSegment() (rocdevice.cpp setupCpuAgent: the nearest CPU agent's fine pool, CPU agent 0
//   when ROCr reports no link distance, as the ROCr double does); a failed lock unlocks the others
//   and answers hipErrorInvalidValue; a base already in the map succeeds and leaks the new object
//   (device.cpp AddMemObj keeps the first), never hipErrorHostMemoryAlreadyRegistered.
// - hipHostUnregister (ihipHostUnregister): unknown is hipErrorHostMemoryNotRegistered (713);
//   known but not a key aborts the process (device.cpp RemoveMemObj guarantee), as does hipFree of
//   a registered range (svmFree: RemoveMemObj(getSvmPtr() == nullptr)); a key is removed and its
//   object released (unlocked once per device, or freed).
// - hipPointerGetAttributes: unknown is hipSuccess with type Unregistered (0), null pointers and
//   device hipInvalidDeviceId (-2); known: Host for host memory (registered, hipHostMalloc) with
//   its host pointer, Device for hipMalloc and the arena, Managed for hipMallocManaged;
//   devicePointer the address on the allocating device; device and allocationFlags the object's.
//
// A forked child: every memory entry point called in a process other than the one that attached
// the ROCr answers hipErrorInvalidValue and does nothing (counted: umem_hip_double_forked_child
// _calls). HIP runs over ROCr, whose KFD refuses every ioctl from a process other than the one
// that opened /dev/kfd (Linux drivers/gpu/drm/amd/amdkfd/kfd_chardev.c, kfd_ioctl: "Using KFD FD
// in wrong process"); clr answers hipErrorInvalidValue when its lock fails (ihipHostRegister).
// The double refuses pointer queries there too, which clr may answer from its own map: a test
// double must not let a child's HIP call pass unnoticed.
//
// umem_hip_double_fail_next(call, result) makes the next call of `call` answer `result` and do
// nothing else. Every entry point counts its attempts (umem_hip_double_attempts), failed ones
// included; umem_hip_double_calls counts successes. One mutex guards everything, ROCr calls
// included (ROCr never calls back into HIP). Built twice: umem_hip_double_partial lacks
// hipEventSynchronize (UMEM_HIP_DOUBLE_WITH_SYNCHRONIZE).
//
// Environment (test-only, read directly): UMEM_HIP_DOUBLE_ROCR.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "double_rocr.hpp"
#include "hip_api.hpp"

#define UMEM_DOUBLE_EXPORT extern "C" __attribute__((visibility("default")))

namespace umem::hip_double {

struct event_state {
  int device = 0;
  unsigned flags = 0;
  bool pending = false;
  void* stream = nullptr;  // where it was last recorded
  bool recorded = false;
};

// What an object of HIP's registry is, by the clr allocation that made it; it decides the memory
// flags clr gives the amd::Memory (and so the pointer attributes).
enum class object_kind {
  svm_device,   // hipMalloc: an SVM buffer on one device (flags 0)
  svm_host,     // hipHostMalloc/hipHostAlloc: CL_MEM_SVM_FINE_GRAIN_BUFFER
  svm_managed,  // hipMallocManaged: CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_ALLOC_HOST_PTR
  registered,   // hipHostRegister: CL_MEM_USE_HOST_PTR | CL_MEM_SVM_ATOMICS, no SVM pointer
};

// One amd::Memory of clr's amd::MemObjMap.
struct mem_object {
  object_kind kind = object_kind::svm_device;
  std::uintptr_t base = 0;  // the host pointer (registered) or SVM pointer (the others)
  std::size_t size = 0;
  int device = 0;      // getUserData().deviceId: the current device of the allocating thread
  unsigned flags = 0;  // getUserData().flags: the flags the caller gave (0 for hipMallocManaged)
  // Registered: the device address of each device's lock, in device order (the ROCr double gives
  // back the host address). Pool-backed kinds: empty; the memory is ROCr's pool allocation.
  std::vector<void*> device_addresses;
};
using object_ref = std::shared_ptr<mem_object>;

struct state {
  std::mutex mu;
  int device_count = 1;
  // Events.
  std::uintptr_t next_event = 1;
  std::map<std::uintptr_t, event_state> events;  // by handle value
  std::set<void*> busy;                           // streams whose queued work has not completed
  event_state last_created{-1};                   // device -1: none yet
  // Memory: amd::MemObjMap (key -> object; a registration's device aliases are keys too) and
  // second registrations of a base already in it, which clr never reaches again.
  std::map<std::uintptr_t, object_ref> objects;
  std::vector<object_ref> leaked;
  attached_rocr rocr;
  int devices_before_attach = 1;
  // What tests read; reset by umem_hip_double_reset.
  std::map<std::string, long> calls;          // successful calls, by entry point
  std::map<std::string, long> attempts;       // every call, by entry point
  long total_attempts = 0;                    // memory and event entry points together
  long cpu_copies = 0;                        // hipMemcpy* done on the CPU (both sides unknown)
  long leaked_registrations = 0;              // registrations AddMemObj did not keep
  long forked_child_calls = 0;                // memory calls refused in a forked child
  std::map<std::string, hip_error> fail_next;  // entry point -> the result of its next call
  std::string last_message;                   // why the last attach failed
};

// The one instance; every entry point locks state().mu.
state& the_state();

// The calling thread's current device (per-thread, as in HIP).
int& current_device();

// Counts an attempt of `call` (in the total too when `in_total`: memory and event entry points).
void count_attempt(state& s, const char* call, bool in_total);
// Whether a test asked `call` to fail now; `out` gets the result it asked for.
bool injected(state& s, const char* call, hip_error& out);
// Counts a success of `call` and answers hipSuccess.
hip_error succeeded(state& s, const char* call);
// The start of every memory entry point: counts the attempt, answers an injected result, and
// makes sure a ROCr is attached (attaching UMEM_HIP_DOUBLE_ROCR on demand). True when the entry
// point must answer `out` at once.
bool enter_memory(state& s, const char* call, hip_error& out);

// Synchronisation, as HIP waits for the GPU (double_events.cpp): `stream`'s queued work completes
// (stream.finish()); every event of `device` completes and its streams go idle (SyncAllStreams).
void finish_stream(state& s, void* stream);
void sync_device(state& s, int device);

}  // namespace umem::hip_double
