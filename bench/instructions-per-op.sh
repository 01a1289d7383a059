#!/usr/bin/env bash
# Instructions per alloc+free of one size, 1 thread: umem against glibc malloc, jemalloc and
# mimalloc, counted by callgrind. Counts do not depend on the machine's load, so they compare fast
# paths where times flip between two speeds (Note [Rounds] in bench/report.cpp); a cache miss or a
# stall costs one instruction here, so they are no replacement for bench/run-benchmarks.sh.
#
#   bench/instructions-per-op.sh [SIZE...]    sizes in bytes, default 256 4096 65536
#
# Counted: every call the benchmark loop makes once per operation (the allocator's allocate and
# free, with a contender's wrapper where it has one), inclusive, divided by the operations; not
# the loop itself. Needs valgrind (Debian package valgrind) and the umem_bench that
# bench/run-benchmarks.sh builds (UMEM_BENCH_BUILD_DIR, default build/bench).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${UMEM_BENCH_BUILD_DIR:-$root/build/bench}"
bench="$build/bench/umem_bench"
script=instructions-per-op
source "$root/bench/callgrind_counting.sh"
[ -x "$bench" ] || { echo "instructions-per-op: no $bench (run bench/run-benchmarks.sh --quick first)" >&2; exit 1; }

known=$("$bench" --benchmark_list_tests --benchmark_filter='^alloc_free/umem/size:[0-9]+/real_time/threads:1$' \
  | sed -E 's|^alloc_free/umem/size:([0-9]+)/.*|\1|' | tr '\n' ' ')
for s in "${sizes[@]}"; do
  [[ " $known" == *" $s "* ]] || {
    echo "instructions-per-op: the benchmark has no size of $s bytes; its sizes: ${known% }" >&2
    exit 2
  }
done

# Prints the instructions per operation in callgrind output $1.
per_op() { callgrind_annotate --tree=caller "$1" | python3 "$root/bench/callgrind_per_op.py"; }

# One count: $1 contender (umem, glibc, jemalloc, mimalloc), $2 size, $3 library to preload or "";
# the fewest of 3 runs (umem's, glibc's and mimalloc's counts repeat exactly; jemalloc's do not:
# 114-218 at 4 KiB in three runs of 2026-12-06, so it does work that depends on time).
count() {
  local out="$work/$1.$2" args=(--expect-malloc=glibc) fewest="" n
  [ "$1" = umem ] || args=(--malloc-only --expect-malloc="$1")
  for run in 1 2 3; do
    LD_PRELOAD="$3" valgrind --tool=callgrind --callgrind-out-file="$out" "$bench" --node=0 \
      "${args[@]}" --benchmark_min_time=0.01 \
      --benchmark_filter="^alloc_free/$1/size:$2/real_time/threads:1\$" > "$out.log" 2>&1 \
      || { echo "instructions-per-op: $1 at $2 B failed (log below)" >&2; tail -n 20 "$out.log" >&2; exit 1; }
    n=$(per_op "$out")
    if [ -z "$fewest" ] || [ "$n" -lt "$fewest" ]; then fewest=$n; fi
  done
  echo "$fewest"
}

preload_of() { awk -v n="$1" '$1 == n { print $2 }' "$build/bench/preload.txt"; }

echo "| size | umem | glibc malloc | jemalloc | mimalloc |"
echo "|---|---:|---:|---:|---:|"
for s in "${sizes[@]}"; do
  umem=$(count umem "$s" "")
  row="| $s B | $umem |"
  for c in glibc jemalloc mimalloc; do
    lib=""
    if [ "$c" != glibc ]; then
      lib=$(preload_of "$c")
      if [ -z "$lib" ] || [ ! -f "$lib" ]; then row+=" n/a |"; continue; fi
    fi
    n=$(count "$c" "$s" "$lib")
    row+=" $n ($(python3 -c "print(f'{$n / $umem:.2f}x')")) |"
  done
  echo "$row"
done
echo
echo "Instructions per allocate + free from the benchmark loop (callgrind, the fewest of 3 runs);"
echo "ratio = contender / umem."
