/* umem C ABI: NUMA-aware, GPU-visible memory for APU nodes, usable from C and through dlopen.
 *
 * Contract: no function throws or aborts. Functions that can fail return a umem_status (or NULL)
 * and set a per-thread message readable with umem_last_error() until the next failing call on
 * that thread. Every function is thread-safe.
 *
 * The default allocator is created on first use from the environment (UMEM_ALLOC_CONF,
 * UMEM_LOG_LEVEL; see `umtopo --options`). umem_init() creates it explicitly with a
 * configuration string of the same syntax, and fails if it already exists. */
#ifndef UMEM_UMEM_H
#define UMEM_UMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum umem_status {
  UMEM_OK = 0,
  UMEM_ERR_INVALID_ARGUMENT = 1, /* bad size, unknown node, foreign pointer, double free, bad conf */
  UMEM_ERR_OUT_OF_MEMORY = 2,    /* the node (or limit) has no room; message has node and stats */
  UMEM_ERR_NOT_FOUND = 3,
  UMEM_ERR_RUNTIME = 4,          /* the GPU runtime failed; message names the call */
  UMEM_ERR_UNSUPPORTED = 5,
  UMEM_ERR_ALREADY_INITIALIZED = 6,
  UMEM_ERR_INTERNAL = 7
} umem_status;

/* Creates the default allocator from `conf` (UMEM_ALLOC_CONF syntax; NULL or "" = defaults
 * merged over the UMEM_ALLOC_CONF environment variable). */
umem_status umem_init(const char* conf);

/* `size` bytes with the default placement and coherence; NULL on failure (see umem_last_error).
 * Alignment is 256 bytes. */
void* umem_alloc(size_t size);

/* Like umem_alloc with an explicit placement ("local", "node:N", "device:D", "interleave:SET")
 * and coherence ("fine", "coarse", "extended_fine"); NULL for either means the default. */
umem_status umem_alloc_ex(size_t size, const char* placement, const char* coherence, void** out);

/* Returns memory from umem_alloc*. NULL is a no-op. A pointer umem does not own, or a second
 * free, is UMEM_ERR_INVALID_ARGUMENT and changes nothing. */
umem_status umem_free(void* ptr);

/* Returns cached, unused segments to the operating system; *released (may be NULL) gets bytes. */
umem_status umem_trim(size_t* released);

/* Statistics as a JSON object (PyTorch memory_stats key names). The caller frees the string with
 * umem_string_free. NULL on failure. */
char* umem_stats_json(void);

/* Where the pages of [ptr, ptr+size) live, as JSON (pages per NUMA node, huge pages, GPU
 * access). The caller frees it with umem_string_free. */
char* umem_residency_json(const void* ptr, size_t size);

void umem_string_free(char* s);

/* The message of this thread's last failure ("" if none). Valid until the next umem call that
 * fails on this thread. */
const char* umem_last_error(void);

/* The status name ("UMEM_ERR_OUT_OF_MEMORY"). */
const char* umem_status_string(umem_status status);

#ifdef __cplusplus
}
#endif

#endif /* UMEM_UMEM_H */
