/* umem's PyTorch bridge (libumem_torch.so): the C functions torch.cuda.memory.CUDAPluggableAllocator
 * loads, plus the statistics, cache, limit and zero-copy helpers the Python package `umem.torch`
 * calls through ctypes. docs/torch-bridge.md gives the semantics in full.
 *
 * Contract: like umem.h, nothing throws or aborts, except umem_torch_malloc after
 * umem_torch_set_oom_exceptions(1) (see there). Failing functions return a umem_status (or
 * NULL) and keep a per-thread message for umem_torch_last_error(). All functions are thread-safe.
 *
 * The bridge (its own umem allocator, separate from umem.h's default one) is created on first use
 * from UMEM_ALLOC_CONF, or explicitly by umem_torch_init. Device d means the GPU with index d in
 * PyTorch's numbering, which is the order of the topology's GPUs ("device:d" placement).
 *
 * Note [Stream-ordered reuse]
 * A block freed on stream A is handed out again at once to a request on stream A (stream order
 * makes that safe), but to another stream only after A's work queued before the free has completed:
 * the free records an event on A and the block goes back to the umem pool when the event has
 * completed. Without a GPU (the "none" backend) events complete at once and reuse is immediate.
 * Where the backend has no events (ROCr today) and no provider is set, blocks are reused by their
 * own stream only and return to the pool at umem_torch_empty_cache(1), whose caller asserts that
 * every device has been synchronized. */
#ifndef UMEM_UMEM_TORCH_H
#define UMEM_UMEM_TORCH_H

#include <stddef.h>
#include <sys/types.h>

#include "umem/umem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Creates the bridge's allocator from `conf` (UMEM_ALLOC_CONF syntax, merged over the environment
 * variable); UMEM_ERR_ALREADY_INITIALIZED once it exists (after any allocation). */
umem_status umem_torch_init(const char* conf);

/* CUDAPluggableAllocator's allocate/free. `stream` is the native stream (cudaStream_t/hipStream_t).
 * device >= 0: placed on device's NUMA node (with the configured coherence and spill policy);
 * device < 0: the configured placement, and no stream. NULL on failure, unless OOM exceptions are
 * on. `size` in umem_torch_free is the size given to umem_torch_malloc (checked). */
void* umem_torch_malloc(ssize_t size, int device, void* stream);
void umem_torch_free(void* ptr, ssize_t size, int device, void* stream);

/* 0 (default): umem_torch_malloc returns NULL on failure. 1: it throws PyTorch's
 * c10::OutOfMemoryError (torch.cuda.OutOfMemoryError in Python) on out-of-memory and c10::Error
 * (RuntimeError) on other failures, with umem's message: PyTorch's pluggable allocator does not
 * check for NULL. Only umem.torch.enable() turns this on; C callers must never. */
void umem_torch_set_oom_exceptions(int enable);

/* CPU memory for tensors: `node` >= 0 places it on that NUMA node, -1 uses the configured policy.
 * Freed with umem_torch_host_free (immediately reusable: no streams). */
umem_status umem_torch_host_malloc(size_t size, int node, void** out);
umem_status umem_torch_host_free(void* ptr);

/* Returns blocks whose streams are done to the pool, then every free cached segment to the OS;
 * `device_synchronized` != 0 asserts all GPU work has completed, so blocks still waiting on an
 * event (or on a stream without events) are returned too. *released gets the bytes (may be NULL). */
umem_status umem_torch_empty_cache(int device_synchronized, size_t* released);

/* Caps device's allocations at fraction (0 < f <= 1) of its NUMA node's memory; 0 removes it. */
umem_status umem_torch_set_memory_fraction(double fraction, int device);

/* Free and total bytes for device: total is the NUMA node's memory (or the fraction's cap); free is
 * what the kernel reports free on that node plus the bridge's cached-but-unused bytes there,
 * bounded by the cap. */
umem_status umem_torch_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

/* PyTorch memory_stats keys for device (or all devices and host allocations for device = -1) as a
 * JSON object (free with umem_torch_string_free); NULL on failure. */
char* umem_torch_memory_stats_json(int device);
umem_status umem_torch_reset_peak_stats(int device);

/* Whether the GPU can access [ptr, ptr+size) in place, as JSON {"accessible": bool, "umem": bool
 * (umem memory), "numa_node": int or null, "reason": "..."}. */
char* umem_torch_gpu_access_json(const void* ptr, size_t size);

/* Where [ptr, ptr+size) lives (umem_residency_json's format). */
char* umem_torch_residency_json(const void* ptr, size_t size);

/* The topology model as snapshot JSON: of this machine when `snapshot_json` is NULL, else of the
 * given snapshot (validated by the snapshot loader). */
char* umem_torch_topology_json(const char* snapshot_json);

/* The APU (NUMA node, CPUs, device) for a local rank, as JSON; see rank_binding.hpp. */
char* umem_torch_rank_binding_json(const char* snapshot_json, int local_rank, int local_size);

/* Binds the calling thread's (and its future threads') memory policy to `node`: mode "bind" or
 * "preferred". */
umem_status umem_torch_set_memory_policy(int node, const char* mode);

/* An event provider for backends without stream events (or tests): C functions on opaque events.
 * Must be set before the bridge exists; NULL fields are an error. */
typedef struct umem_torch_event_provider {
  void* (*create)(int device);
  void (*record)(void* event, void* stream);
  int (*query)(void* event); /* 1 completed, 0 pending, < 0 error */
  void (*synchronize)(void* event);
  void (*destroy)(void* event);
} umem_torch_event_provider;
umem_status umem_torch_set_event_provider(const umem_torch_event_provider* provider);

/* The bridge's configuration and sources, one per line. */
char* umem_torch_describe(void);

void umem_torch_string_free(char* s);
const char* umem_torch_last_error(void);
umem_status umem_torch_last_status(void);

#ifdef __cplusplus
}
#endif

#endif /* UMEM_UMEM_TORCH_H */
