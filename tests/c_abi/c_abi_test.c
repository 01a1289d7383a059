/* The C ABI used from C: allocation, misuse, statistics, residency and errors, with no C++ in
 * sight. Exit status 0 only if every check passed; each failure is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "umem/umem.h"

static int failures = 0;
#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n",       \
              __FILE__, __LINE__, #cond, umem_last_error());              \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

int main(void) {
  CHECK(umem_init("policy:node:0,spill:never") == UMEM_OK);
  CHECK(umem_init(NULL) == UMEM_ERR_ALREADY_INITIALIZED);
  CHECK(strstr(umem_last_error(), "already exists") != NULL);

  char* p = umem_alloc(1 << 20);
  CHECK(p != NULL);
  if (p) memset(p, 7, 1 << 20);

  char* stats = umem_stats_json();
  CHECK(stats != NULL && strstr(stats, "\"allocated_bytes.all.current\": 1048576") != NULL);
  umem_string_free(stats);

  char* res = umem_residency_json(p, 1 << 20);
  CHECK(res != NULL && strstr(res, "\"per_node\": {\n      \"0\": 256") != NULL);
  umem_string_free(res);

  void* q = NULL;
  CHECK(umem_alloc_ex(4096, "node:0", "coarse", &q) == UMEM_OK && q != NULL);
  CHECK(umem_alloc_ex(4096, "node:zero", NULL, &q) == UMEM_ERR_INVALID_ARGUMENT && q == NULL);
  CHECK(strstr(umem_last_error(), "node:zero") != NULL);
  CHECK(umem_alloc_ex(4096, NULL, "lukewarm", &q) == UMEM_ERR_INVALID_ARGUMENT);
  CHECK(strstr(umem_last_error(), "lukewarm") != NULL);

  CHECK(umem_alloc(0) == NULL);
  CHECK(strlen(umem_last_error()) > 0);

  int local = 0;
  CHECK(umem_free(&local) == UMEM_ERR_INVALID_ARGUMENT);
  CHECK(umem_free(p) == UMEM_OK);
  CHECK(umem_free(NULL) == UMEM_OK);

  size_t released = 0;
  CHECK(umem_trim(&released) == UMEM_OK);
  CHECK(strcmp(umem_status_string(UMEM_ERR_OUT_OF_MEMORY), "UMEM_ERR_OUT_OF_MEMORY") == 0);

  if (failures == 0) printf("c_abi: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
