#!/usr/bin/env bash
# Instructions per `torch.empty` + drop in a Python loop (cpu_alloc_free.py's part 1 loop, 1
# thread), PyTorch's DefaultCPUAllocator against umem (enable_host()), counted by callgrind with
# its cache simulation. Counts do not depend on the machine's load; the loop is all that is
# counted: callgrind zeroes its counts when the driver calls os.getppid() just before the loop and
# dumps them at os.getpgrp() just after it. Prints per operation: instructions, and first-level
# data-cache read misses of the simulated cache. PYTHONHASHSEED=0 makes both repeat exactly from
# run to run; with Python's random hash seeds, PyTorch's count moved by up to 190 instructions and
# the simulated misses by several per operation. `RUNS=N` repeats each pair.
#
#   bench/torch_alloc/python-instructions-per-op.sh [SIZE...]   bytes; default 256 4096 65536
#
# Needs valgrind, Debian's python3-torch (PYTHON, default /usr/bin/python3) and the Release build
# (UMEM_TORCH_LIBRARY, default build/release/python/umem/libumem_torch.so); a minute per run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
script=python-instructions-per-op
source "$root/bench/callgrind_counting.sh"
# Debian's libtorch links libhwy (through OpenCV's image codecs), whose start-up timer runs
# rdtscp; valgrind decodes rdtscp only where the CPU reports it, else it stops Python with SIGILL.
grep -qw rdtscp /proc/cpuinfo ||
  { echo "$script: this CPU does not report rdtscp, without which valgrind cannot run Debian's" \
      "PyTorch (libhwy's timer uses it); count on a machine whose CPU reports it" >&2; exit 1; }
runs="${RUNS:-1}"
iterations=2000
python="${PYTHON:-/usr/bin/python3}"  # Debian's, with python3-torch

driver='
import os, sys
sys.path.insert(0, sys.argv[1])
import cpu_alloc_free as bench
allocator, size, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch = bench.start(allocator)
bench.python_loop(torch, size, 1000)  # warm: every cache and free list in its steady state
os.getppid()
bench.python_loop(torch, size, n)
os.getpgrp()
'

echo "size  allocator  instructions/op  D1 read misses/op (simulated)"
for size in "${sizes[@]}"; do
  for run in $(seq "$runs"); do
    for allocator in pytorch umem; do
      out="$work/cg.$size.$allocator.$run"
      PYTHONHASHSEED=0 valgrind --tool=callgrind --cache-sim=yes --zero-before=getppid \
        --dump-before=getpgrp \
        --callgrind-out-file="$out" "$python" -c "$driver" "$root/bench/torch_alloc" "$allocator" \
        "$size" "$iterations" > "$out.log" 2>&1 ||
        { echo "$script: $allocator at $size B failed (log below)" >&2; tail -n 20 "$out.log" >&2
          exit 1; }
      # The dump at os.getpgrp() is part 1 ($out.1); its summary line has the loop's events
      # (Ir Dr Dw I1mr D1mr ...).
      [ -f "$out.1" ] || { echo "$script: callgrind made no dump at os.getpgrp()" >&2; exit 1; }
      read -r ir d1mr < <(awk -v n="$iterations" '/^summary:/ { print $2 / n, $6 / n }' "$out.1")
      printf '%-5s %-10s %15.0f  %.1f\n' "$size" "$allocator" "$ir" "$d1mr"
    done
  done
done
