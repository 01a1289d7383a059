#!/usr/bin/env bash
# Builds umem's allocator benchmarks in Release, runs them, prints the comparison as markdown and
# writes it to docs/benchmarks.md.
#
#   bench/run-benchmarks.sh           full run (about 4 minutes on a 2-core machine)
#   bench/run-benchmarks.sh --quick   smoke run for CI (under a minute), same tables, noisier
#
# Environment: UMEM_BENCH_BUILD_DIR (default build/bench), UMEM_BENCH_OUT (default
# docs/benchmarks.md), UMEM_BENCH_NODE (NUMA node to place memory on, default 0).
# jemalloc and mimalloc are preloaded into processes of their own (bench/malloc_identity.hpp);
# a missing one is skipped with a message and shows as n/a.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${UMEM_BENCH_BUILD_DIR:-$root/build/bench}"
out="${UMEM_BENCH_OUT:-$root/docs/benchmarks.md}"
node="${UMEM_BENCH_NODE:-0}"

mode=full
case "${1:-}" in
  "") ;;
  --quick) mode=quick ;;
  *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
if [ "$mode" = quick ]; then
  gbench=(--benchmark_min_time=0.02)
  first_touch_iterations=1
  settings="quick: min_time 0.02 s per benchmark, 1 repetition, 1 first touch per mode"
else
  gbench=(--benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
  first_touch_iterations=3
  settings="min_time 0.1 s per benchmark, median of 3 repetitions, 3 first touches per mode per repetition"
fi

# Release at -O2 (what distributions ship): GCC 12 at -O3 reports a false -Wrestrict inside
# std::string in importers/, and warnings are errors.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DUMEM_BUILD_TESTS=OFF -DUMEM_BUILD_BENCHMARKS=ON > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log" >&2; exit 1; }
cmake --build "$build" --target umem_bench umem_bench_report -j 2

results="$build/results"
rm -rf "$results"
mkdir -p "$results"
bench="$build/bench/umem_bench"
common=(--node="$node" "${gbench[@]}" --benchmark_format=console)

echo "== umem, glibc malloc, libnuma, hwloc, mmap+mbind, first touch"
"$bench" "${common[@]}" --expect-malloc=glibc --first-touch-iterations="$first_touch_iterations" \
  --benchmark_out="$results/main.json" --benchmark_out_format=json

while read -r name lib; do
  if [ ! -f "$lib" ]; then
    echo "== $name: not installed ($lib), skipped (Debian package lib$name-dev)" >&2
    continue
  fi
  echo "== $name (LD_PRELOAD=$lib)"
  LD_PRELOAD="$lib" "$bench" "${common[@]}" --malloc-only --expect-malloc="$name" \
    --benchmark_out="$results/$name.json" --benchmark_out_format=json
done < "$build/bench/preload.txt"

command="bench/run-benchmarks.sh${1:+ $1}"
echo
"$build/bench/umem_bench_report" --out "$out" --command "$command" --settings "$settings" \
  "$results"/*.json
# Issue 7's side-by-side trace replay (measured on the GPU machine, where PyTorch's caching
# allocator runs) is kept in docs/trace-replay.md; its results section is carried over verbatim.
trace_doc="$root/docs/trace-replay.md"
if [ -f "$trace_doc" ] && [ "$out" = "$root/docs/benchmarks.md" ]; then
  {
    echo
    echo "## Real training traces: umem vs PyTorch's caching allocator (from docs/trace-replay.md)"
    echo
    echo "Regenerate: \`bash bench/trace_replay/cca/run-on-h200.sh DIR\` on the GPU machine (see"
    echo "docs/trace-replay.md); umem alone, quick, on any machine: \`ctest -L '^trace\$'\`."
    echo
    sed -n '/^## Results on the H200/,/^## /{/^## /d;p}' "$trace_doc"
  } >> "$out"
fi
# One alloc+free through PyTorch, against PyTorch's own allocator, measured on the GPU machine too:
# kept in docs/pytorch-parity.md and carried over the same way.
parity_doc="$root/docs/pytorch-parity.md"
if [ -f "$parity_doc" ] && [ "$out" = "$root/docs/benchmarks.md" ]; then
  {
    echo
    echo "## One alloc+free through PyTorch: umem vs PyTorch's allocator (from docs/pytorch-parity.md)"
    echo
    echo "Regenerate: \`python3 bench/torch_alloc/alloc_free.py\` on the GPU machine (see"
    echo "docs/pytorch-parity.md)."
    echo
    sed -n '/^## One alloc+free through PyTorch on the H200/,/^## /{/^## /d;p}' "$parity_doc"
  } >> "$out"
fi
echo
echo "written: $out"
