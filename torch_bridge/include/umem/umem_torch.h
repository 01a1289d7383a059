/* umem's PyTorch bridge (libumem_torch.so): the C functions PyTorch's allocator reaches (through
 * CUDAPluggableAllocator or umem's extension), plus the statistics, cache, limit, zero-copy,
 * weights and binding helpers the Python package `umem.torch` calls through ctypes. This header is
 * the one list of the ABI: tests/python/test_abi.py checks the ctypes table (python/umem/_lib.py)
 * and the extension's table against it. docs/torch-bridge.md gives the semantics in full.
 *
 * Contract: like umem.h, nothing throws or aborts, except umem_torch_pluggable_malloc after
 * umem_torch_set_oom_exceptions(1) (see there). Failing functions return a umem_status (or
 * NULL) and keep a per-thread message for umem_torch_last_error(). All functions are thread-safe.
 *
 * The bridge (its own umem allocator, separate from umem.h's default one) is created on first use
 * from UMEM_ALLOC_CONF, or explicitly by umem_torch_init. Device d means the GPU with index d in
 * PyTorch's numbering, which is the order of the topology's GPUs ("device:d" placement).
 *
 * Two ways in, one section each below: umem_torch_pluggable_malloc/_free are the functions
 * PyTorch's pluggable allocator loads; the extension-mode functions serve umem's PyTorch allocator
 * extension (python/umem, docs/torch-bridge.md), which implements PyTorch's whole allocator
 * interface. The sections after them serve both modes and umem.torch's own functions.
 *
 * Note [Stream-ordered reuse]
 * A block freed on stream A is handed out again at once to a request on stream A (stream order
 * makes that safe), but to another stream only after A's work queued before the free has completed:
 * the free records an event on A and the block goes back to the umem pool when the event has
 * completed. A block that umem_torch_record_stream says is used on other streams too is reused by
 * no stream until the work queued on all of them at the free has completed. Without a GPU (the
 * "none" backend) events complete at once and reuse is immediate. Where the backend has no events
 * and no provider is set, blocks are reused by their own stream only and return to the pool at
 * umem_torch_empty_cache(1), whose caller asserts that every device has been synchronized. */
#ifndef UMEM_UMEM_TORCH_H
#define UMEM_UMEM_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "umem/umem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- Errors and returned strings (every mode) ------------------------------------------------- */
/* Frees a string (JSON or text) a function below returned. */
void umem_torch_string_free(char* s);
/* The calling thread's last failure: its message and status. */
const char* umem_torch_last_error(void);
umem_status umem_torch_last_status(void);

/* --- Enabling: the bridge, its configuration, its stream events ------------------------------- */
/* Creates the bridge's allocator from `conf` (UMEM_ALLOC_CONF syntax, merged over the environment
 * variable); UMEM_ERR_ALREADY_INITIALIZED once it exists (after any allocation). */
umem_status umem_torch_init(const char* conf);

/* The bridge's configuration and sources, one per line. */
char* umem_torch_describe(void);

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

/* --- Pluggable mode: torch.cuda.memory.CUDAPluggableAllocator --------------------------------- */
/* CUDAPluggableAllocator's allocate/free. `stream` is the native stream (cudaStream_t/hipStream_t).
 * device >= 0: placed on device's NUMA node (with the configured coherence and spill policy);
 * device < 0: the configured placement, and no stream. NULL on failure, unless OOM exceptions are
 * on. `size` in umem_torch_pluggable_free is the size given to umem_torch_pluggable_malloc
 * (checked). */
void* umem_torch_pluggable_malloc(ssize_t size, int device, void* stream);
void umem_torch_pluggable_free(void* ptr, ssize_t size, int device, void* stream);

/* 0 (default): umem_torch_pluggable_malloc returns NULL on failure. 1: it throws
 * std::runtime_error with umem's message (RuntimeError in Python; on out-of-memory the message
 * starts with PyTorch's "CUDA out of memory." line): PyTorch's pluggable allocator does not check
 * for NULL. Only the pluggable mode of umem.torch.enable() turns this on; C callers must never.
 * The extension mode raises torch.cuda.OutOfMemoryError itself (umem_cuda_allocator.cpp); a C++
 * exception of PyTorch's own types cannot be thrown from here without linking PyTorch. */
void umem_torch_set_oom_exceptions(int enable);

/* --- Extension mode: umem's PyTorch allocator extension (umem_cuda_allocator.cpp) ------------- */
/* At least `size` bytes for `device` (>= 0) used on `stream`, in *out. UMEM_ERR_OUT_OF_MEMORY's
 * message starts like PyTorch's ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a
 * total capacity of ...", HIP on ROCr) and ends with umem's detail. */
umem_status umem_torch_extension_alloc(size_t size, int device, void* stream, void** out);
/* Frees a block of umem_torch_extension_alloc; it waits for its allocation stream and the streams
 * umem_torch_record_stream named (Note [Stream-ordered reuse]). UMEM_ERR_NOT_FOUND, changing
 * nothing, for a pointer umem did not hand out (the extension then gives it to PyTorch's). */
umem_status umem_torch_extension_release(void* ptr);
umem_status umem_torch_record_stream(void* ptr, void* stream);
/* Memory PyTorch's own caching allocator takes for its private pools (graphs, MemPools): umem
 * memory of the device, not counted in umem_torch_get_device_stats (PyTorch counts it). */
umem_status umem_torch_segment_alloc(size_t size, int device, void** out);
umem_status umem_torch_segment_free(void* ptr);
/* What PyTorch's own caching allocator reserves on `device` (its private pools): it counts
 * against the memory fraction's cap as well, as PyTorch's fraction covers the whole device. */
umem_status umem_torch_set_external_reserved(int device, uint64_t bytes);
/* 1 when ptr is a live block of umem_torch_extension_alloc or umem_torch_host_malloc, else 0. */
int umem_torch_owns(const void* ptr);
/* A CUDA/HIP graph capture begins / ends in the process: while one is underway no event is
 * queried or recorded (frees are deferred until the last capture ends). */
void umem_torch_capture_begin(void);
void umem_torch_capture_end(void);

/* PyTorch's DeviceStats for `device` (UMEM_TORCH_ALL_DEVICES: every device and the host, whose
 * peaks add the devices' peak and the host's; UMEM_TORCH_HOST: umem_torch_host_malloc's
 * allocations alone, CPU tensors, counted per thread: peaks exact while one thread allocates, else
 * short by at most 4 MiB per other thread). Index 0 of each array is
 * "all", 1 "small_pool" (blocks of at most 1 MiB), 2 "large_pool". Sizes are PyTorch's
 * (requests rounded up to 512 bytes); reserved_bytes and segment are umem's segments holding the
 * device's memory. */
#define UMEM_TORCH_ALL_DEVICES (-1)
#define UMEM_TORCH_HOST (-2)
typedef struct umem_torch_stat {
  int64_t current, peak, allocated, freed;
} umem_torch_stat;
typedef struct umem_torch_device_stats {
  umem_torch_stat allocation[3], segment[3], active[3], allocated_bytes[3], reserved_bytes[3],
      active_bytes[3], requested_bytes[3];
  int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
} umem_torch_device_stats;
umem_status umem_torch_get_device_stats(int device, umem_torch_device_stats* out);
umem_status umem_torch_reset_accumulated_stats(int device);

/* The segments holding device's memory, each with its blocks in address order, for PyTorch's
 * memory snapshots. `visit` is called once per segment, outside umem's locks. */
typedef struct umem_torch_block_info {
  uint64_t size, requested;
  int allocated; /* handed to PyTorch */
  int active;    /* allocated, or freed but still used by a stream */
} umem_torch_block_info;
typedef struct umem_torch_segment_info {
  uint64_t address, size;
  int is_large;
  size_t block_count;
  const umem_torch_block_info* blocks;
} umem_torch_segment_info;
typedef void (*umem_torch_segment_visitor)(void* ctx, const umem_torch_segment_info* segment);
umem_status umem_torch_visit_segments(int device, umem_torch_segment_visitor visit, void* ctx);

/* --- Statistics, cache and capacity (both modes, and umem.torch's functions) ------------------ */
/* Returns blocks whose streams are done to the pool, then every free cached segment to the OS;
 * `device_synchronized` != 0 asserts all GPU work has completed, so blocks still waiting on an
 * event (or on a stream without events) are returned too. *released gets the bytes (may be NULL). */
umem_status umem_torch_empty_cache(int device_synchronized, size_t* released);

/* PyTorch's per-process memory fraction: caps the memory reserved for device at fraction
 * (0 <= f <= 1) of its capacity, umem_torch_mem_get_info's total without a cap (Note [Memory
 * fraction] in torch_bridge/bridge.hpp); 1 (the default) removes the cap. */
umem_status umem_torch_set_memory_fraction(double fraction, int device);
umem_status umem_torch_get_memory_fraction(int device, double* fraction);

/* Free and total bytes for device: total is the NUMA node's memory (or the fraction's cap); free is
 * what the kernel reports free on that node plus the bridge's cached-but-unused bytes there,
 * bounded by the cap. */
umem_status umem_torch_mem_get_info(int device, size_t* free_bytes, size_t* total_bytes);

/* PyTorch memory_stats keys for device (or UMEM_TORCH_ALL_DEVICES, UMEM_TORCH_HOST as for
 * umem_torch_get_device_stats) as a JSON object (free with umem_torch_string_free); NULL on
 * failure. */
char* umem_torch_memory_stats_json(int device);
umem_status umem_torch_reset_peak_stats(int device);

/* --- Host tensors and zero-copy aliases ------------------------------------------------------- */
/* CPU memory for tensors: `node` >= 0 places it on that NUMA node, -1 uses the configured policy.
 * Freed with umem_torch_host_free: reusable at once, unless umem_torch_host_record_use named a
 * stream for it. */
umem_status umem_torch_host_malloc(size_t size, int node, void** out);
umem_status umem_torch_host_free(void* ptr);
/* `stream` (native) of GPU `device` transfers to or from the live block `ptr` of
 * umem_torch_host_malloc (PyTorch's pinned-memory record_event): its free then waits for the work
 * queued on that stream before the block is reused (Note [Host blocks in flight] in bridge.hpp).
 * UMEM_ERR_NOT_FOUND, recording nothing, for memory that is no live host block, or a block another
 * GPU's streams used already. */
umem_status umem_torch_host_record_use(void* ptr, void* stream, int device);

/* Whether the GPU can access [ptr, ptr+size) in place, as JSON {"accessible": bool, "umem": bool
 * (umem memory), "host_accessible": bool (false for a discrete GPU's own memory), "registrable":
 * bool (not accessible, but umem_torch_alias_register pins it for an alias's life: memory umem did
 * not allocate, with HIP loaded and XNACK off, where every GPU uses host memory as its own),
 * "reason": "..."}. */
char* umem_torch_gpu_access_json(const void* ptr, size_t size);

/* For a zero-copy alias of [ptr, ptr+size): memory umem did not allocate, which
 * umem_torch_gpu_access_json calls accessible (XNACK on) or registrable (XNACK off), is made usable
 * by the GPU and its runtime's own copies and fills while the alias lives (with HIP loaded:
 * registered with hipHostRegister, which pins it, Note [GPU visibility under HIP] in
 * hip_gpu_mapper.hpp; the last release waits for the GPU's streams). *handle gets what to pass to
 * umem_torch_alias_release when the alias dies, NULL when nothing was needed (umem's own memory;
 * memory HIP knows already). UMEM_ERR_UNSUPPORTED, with the reason, when the memory cannot be
 * aliased: the caller copies instead. */
umem_status umem_torch_alias_register(const void* ptr, size_t size, void** handle);
umem_status umem_torch_alias_release(void* handle);

/* Where GPU `device`'s tensors live, as JSON {"device": d, "memory": "host" (a unified GPU: its
 * memory is host memory on NUMA node "numa_node", which the GPU uses in place) or "device" (a
 * discrete GPU's own memory), "numa_node": the node nearest the GPU}; NULL for an unknown device. */
char* umem_torch_device_json(int device);

/* Where [ptr, ptr+size) lives (umem_residency_json's format). */
char* umem_torch_residency_json(const void* ptr, size_t size);

/* --- Model weights ---------------------------------------------------------------------------- */
/* Model weights (weights/, Note [Reading weights]). The .safetensors files a checkpoint path names
 * (a file, a *.safetensors.index.json, or a folder holding one of them) as a JSON object
 * {"files": [paths], "weight_map": {tensor: path}}; NULL on failure. */
char* umem_torch_checkpoint_json(const char* path);
/* Reads the .safetensors file `path` into umem host memory on NUMA node `node` (-1: the
 * configured placement; else the readers run on the node's CPUs too) with `threads` readers (0:
 * one per hardware thread, at most 16), with
 * O_DIRECT when `direct_io`. JSON {"block": address to free with umem_torch_host_free, "data":
 * address of the data section (inside the block), "data_bytes": n, "metadata": {...},
 * "tensors": [{"name", "dtype" (the format's name), "shape": [...], "begin", "end"} (offsets in the
 * data section)]}; NULL on failure (the message names the file, the tensor and the rule). */
char* umem_torch_load_safetensors_json(const char* path, int node, unsigned threads,
                                       int direct_io);
/* The layout of the .safetensors file `path` without reading its data: JSON {"data_offset": file
 * offset of the data section, "data_bytes", "metadata", "tensors"} as above; NULL on failure. */
char* umem_torch_safetensors_layout_json(const char* path);
/* Reads `bytes` at file `offset` of `path` into `to` with `threads` readers running on NUMA node
 * `node`'s CPUs (-1: anywhere), with O_DIRECT when `direct_io` (then `offset` and `to` are
 * multiples of 4096; a last partial block is read plainly). For staging weights into a discrete
 * GPU's memory chunk by chunk. */
umem_status umem_torch_read_file(const char* path, uint64_t offset, uint64_t bytes, void* to,
                                 int node, unsigned threads, int direct_io);

/* --- Machine and rank binding ----------------------------------------------------------------- */
/* The topology model as snapshot JSON: of this machine when `snapshot_json` is NULL, else of the
 * given snapshot (validated by the snapshot loader). */
char* umem_torch_topology_json(const char* snapshot_json);

/* The APU (NUMA node, CPUs, device) for a local rank, as JSON; see rank_binding.hpp. */
char* umem_torch_rank_binding_json(const char* snapshot_json, int local_rank, int local_size);

/* Binds the calling thread's (and its future threads') memory policy to `node`: mode "bind" or
 * "preferred". */
umem_status umem_torch_set_memory_policy(int node, const char* mode);

#ifdef __cplusplus
}
#endif

#endif /* UMEM_UMEM_TORCH_H */
