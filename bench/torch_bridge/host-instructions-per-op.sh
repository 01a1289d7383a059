#!/usr/bin/env bash
# Instructions per alloc+free of a CPU tensor's memory through the torch bridge (what umem's CPU
# allocator extension calls for every CPU tensor): umem_torch_host_malloc + umem_torch_host_free,
# 1 thread, counted by callgrind, with the allocator's own share beside it. Counts do not depend on
# the machine's load; bench/instructions-per-op.sh counts the allocator's C++ API alone.
#
#   bench/torch_bridge/host-instructions-per-op.sh [SIZE...]   bytes; default 256 4096 65536
#
# Each count is the difference of two runs of umem-torch-host-alloc-free (ITERATIONS 0 and
# 100000) divided by 100000: the process's start and the warm-up cancel. Under valgrind glibc
# cannot register rseq, so sched_getcpu() (the `local` policy's node, os_memory.cpp) takes its
# vDSO fallback: the default policy's share is larger here than on a machine's own run. Needs
# valgrind and the Release build of bench/run-benchmarks.sh (UMEM_BENCH_BUILD_DIR, default
# build/bench); UMEM_ALLOC_CONF applies as usual ("policy:node:0" shows a fixed policy's path).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${UMEM_BENCH_BUILD_DIR:-$root/build/bench}"
prog="$build/bench/torch_bridge/umem-torch-host-alloc-free"
script=host-instructions-per-op
source "$root/bench/callgrind_counting.sh"
[ -x "$prog" ] || {
  echo "host-instructions-per-op: no $prog" \
    "(cmake --build $build --target umem-torch-host-alloc-free)" >&2
  exit 1
}

iterations=100000

# Instructions of one run ($1 size, $2 iterations): total, then the allocator's inclusive share
# (allocator::allocate_cached and allocator::deallocate, the bridge's two calls into it).
run() {
  local out="$work/cg.$1.$2"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$prog" "$1" "$2" > "$out.log" 2>&1 \
    || { echo "host-instructions-per-op: $1 B failed (log below)" >&2; tail -n 20 "$out.log" >&2
         exit 1; }
  callgrind_annotate --inclusive=yes "$out" | python3 -c '
import re, sys
total = share = 0
for line in sys.stdin:
    m = re.match(r"^\s*([\d,]+) \(.*?\)\s+(.*)$", line)
    if not m:
        continue
    n, what = int(m[1].replace(",", "")), m[2]
    if "PROGRAM TOTALS" in what:
        total = n
    elif re.search(r"umem::alloc::allocator::"
                   r"(allocate_cached\(unsigned long\)|deallocate\(void\*\)) \[", what):
        share += n
print(total, share)'
}

echo "| size | bridge host malloc+free | of which the allocator |"
echo "|---|---:|---:|"
for s in "${sizes[@]}"; do
  read -r t0 a0 < <(run "$s" 0)
  read -r t1 a1 < <(run "$s" "$iterations")
  echo "| $s B | $(( (t1 - t0) / iterations )) | $(( (a1 - a0) / iterations )) |"
done
echo
echo "Instructions per umem_torch_host_malloc + umem_torch_host_free (callgrind; runs of 0 and"
echo "$iterations iterations, the difference divided by $iterations)."
