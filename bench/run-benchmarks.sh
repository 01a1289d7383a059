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
# Sections written by hand (results of other benchmarks on this machine) follow a marker line in
# docs/benchmarks.md; they are kept, after the regenerated and carried sections.
marker='<!-- Written by hand from here on'
kept=
if [ "$out" = "$root/docs/benchmarks.md" ] && [ -f "$out" ]; then
  kept=$(sed -n "/^$marker/,\$p" "$out")
fi
echo
"$build/bench/umem_bench_report" --out "$out" --command "$command" --settings "$settings" \
  "$results"/*.json
# Results measured on the GPU machine (where PyTorch's caching allocator runs) are kept in their own
# documents; their results sections are carried over verbatim.
# carry DOC SECTION-HEADING TITLE REGENERATE-SENTENCE...
carry() {
  local doc=$root/$1 heading=$2 title=$3
  shift 3
  [ -f "$doc" ] && [ "$out" = "$root/docs/benchmarks.md" ] || return 0
  {
    echo
    echo "## $title"
    echo
    printf '%s\n' "$@"
    echo
    sed -n "/^## $heading/,/^## /{/^## /d;p}" "$doc"
  } >> "$out"
}
carry docs/trace-replay.md "Results on the H200" \
  "Real training traces: umem vs PyTorch's caching allocator (from docs/trace-replay.md)" \
  "Regenerate: \`bash bench/trace_replay/cca/run-on-h200.sh DIR\` on the GPU machine (see" \
  "docs/trace-replay.md); umem alone, quick, on any machine: \`ctest -L '^trace\$'\`."
carry docs/pytorch-parity.md "Training on the H200: umem against PyTorch's allocator, default and expandable" \
  "Training on the H200: umem vs PyTorch's allocator (from docs/pytorch-parity.md)" \
  "Regenerate: \`python3 bench/torch_alloc/training.py\` on the GPU machine (see" \
  "docs/pytorch-parity.md)."
carry docs/pytorch-parity.md "Real traces replayed from C++ through PyTorch's allocator interface" \
  "Real traces from C++ through PyTorch's allocator interface (from docs/pytorch-parity.md)" \
  "Regenerate: \`python3 bench/torch_alloc/trace_replay.py TRACE.csv.gz...\` on the GPU machine" \
  "(see docs/pytorch-parity.md)."
carry docs/pytorch-parity.md "One alloc+free through PyTorch on the H200" \
  "One alloc+free through PyTorch: umem vs PyTorch's allocator (from docs/pytorch-parity.md)" \
  "Regenerate: \`python3 bench/torch_alloc/alloc_free.py\` on the GPU machine (see" \
  "docs/pytorch-parity.md)."
if [ -n "$kept" ]; then
  printf '\n%s\n' "$kept" >> "$out"
fi
echo
echo "written: $out"
