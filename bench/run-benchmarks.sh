#!/usr/bin/env bash
# Builds umem's allocator benchmarks in Release, runs them, prints the comparison as markdown,
# writes it to docs/benchmarks.md (generated, nothing else in it) and draws
# docs/pictures/alloc-free-per-size.svg from the same results.
#
#   bench/run-benchmarks.sh           full run (about 8 minutes on a 2-core machine)
#   bench/run-benchmarks.sh --quick   smoke run for CI (under a minute), same tables, noisier
#
# Environment: UMEM_BENCH_BUILD_DIR (default build/bench), UMEM_BENCH_OUT (default
# docs/benchmarks.md), UMEM_BENCH_PICTURES (default docs/pictures), UMEM_BENCH_NODE (NUMA node to
# place memory on, default 0).
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
  rounds=1
  first_touch_iterations=1
  settings="quick: min_time 0.02 s per benchmark, 1 round, 1 first touch per mode"
else
  gbench=(--benchmark_min_time=0.1)
  rounds=5
  first_touch_iterations=3
  settings="min_time 0.1 s per benchmark, fastest of 5 rounds, 3 first touches per mode per round"
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

# Rounds (Note [Rounds] in bench/report.cpp): each runs every process once per family, the
# contenders' processes one after the other, and the report takes each row's fastest round.
preloads=()
while read -r name lib; do
  if [ -f "$lib" ]; then
    preloads+=("$name=$lib")
  else
    echo "== $name: not installed ($lib), skipped (Debian package lib$name-dev)" >&2
  fi
done < "$build/bench/preload.txt"
for round in $(seq "$rounds"); do
  for family in alloc_free mix first_touch; do
    echo "== round $round of $rounds, $family: umem, glibc malloc, libnuma, hwloc, mmap+mbind"
    "$bench" "${common[@]}" --expect-malloc=glibc --first-touch-iterations="$first_touch_iterations" \
      --benchmark_filter="^$family/" \
      --benchmark_out="$results/round$round-glibc-$family.json" --benchmark_out_format=json
    [ "$family" = first_touch ] && continue  # malloc has no first-touch benchmark
    for preload in "${preloads[@]}"; do
      name=${preload%%=*}
      lib=${preload#*=}
      echo "== round $round of $rounds, $family: $name (LD_PRELOAD=$lib)"
      LD_PRELOAD="$lib" "$bench" "${common[@]}" --malloc-only --expect-malloc="$name" \
        --benchmark_filter="^$family/" \
        --benchmark_out="$results/round$round-$name-$family.json" --benchmark_out_format=json
    done
  done
done

command="bench/run-benchmarks.sh${1:+ $1}"
# The script writes only its own generated page. Results measured elsewhere (the GPU machine) and
# what was written by hand about runs live in docs/results.md, the method pages and docs/log/.
echo
"$build/bench/umem_bench_report" --out "$out" --command "$command" --settings "$settings" \
  "$results"/*.json
# Pictures for docs/results.md: time per size against jemalloc, mimalloc and glibc, from the page
# just written, so the picture shows its numbers (bench/plot_results.py, Python's standard library
# only).
pictures="${UMEM_BENCH_PICTURES:-$root/docs/pictures}"
python3 "$root/bench/plot_results.py" alloc-sizes --out "$pictures/alloc-free-per-size.svg" \
  --from-markdown "$out"
echo
echo "written: $out"
