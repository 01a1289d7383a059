#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) and runs each for a bounded time, seeded with the real
# captures (and umem's own seeds for safetensors headers, the KFD tree and UMEM_ALLOC_CONF). The
# seeds are copied into a temporary directory; nothing is written into the repository.
#
# Usage: scripts/run-fuzzers.sh BUILD_DIR SECONDS_PER_TARGET
#   BUILD_DIR  a build directory for fuzzing only (configured here with clang if new)
#   UMEM_FIXTURES_DIR overrides the captures' folder (default ../shared/fixtures/machines).
# The targets run as many at a time as there are cores.
# Exits non-zero if any target crashes, hangs or a sanitizer reports; the input that did it is
# kept in BUILD_DIR/fuzz-findings/ and the end of the target's log is printed.
set -euo pipefail

if [[ $# -ne 2 || ! $2 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 BUILD_DIR SECONDS_PER_TARGET" >&2
  exit 2
fi
build=$1
seconds=$2
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=${UMEM_FIXTURES_DIR:-$root/../shared/fixtures/machines}
if [[ ! -d $fixtures ]]; then
  echo "$0: no captures at $fixtures (set UMEM_FIXTURES_DIR)" >&2
  exit 2
fi

read -ra extra <<< "${UMEM_CMAKE_ARGS:-}"  # more -D options, as scripts/build.sh takes them
CC=${CC:-clang} CXX=${CXX:-clang++} cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUMEM_BUILD_FUZZERS=ON -DUMEM_WERROR=ON "${extra[@]}" >/dev/null
targets=(rocminfo numactl snapshot safetensors kfd_topology alloc_conf)
cmake --build "$build" -j 2 --target "${targets[@]/#/fuzz_}" fuzz_snapshot_seeds

work=$(mktemp -d "${TMPDIR:-/tmp}/umem-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
for target in "${targets[@]}"; do mkdir -p "$work/$target"; done
cp "$fixtures"/rocminfo* "$fixtures"/kfd_mem_banks_rocminfo* "$work/rocminfo/"
cp "$fixtures"/numactl* "$work/numactl/"
"$build/tests/fuzz/fuzz_snapshot_seeds" "$work/snapshot" "$work"/rocminfo/* "$work"/numactl/*
# safetensors headers and an index, written for umem (tests/fuzz/safetensors_seeds).
cp "$root"/tests/fuzz/safetensors_seeds/* "$work/safetensors/"
# KFD: the captured properties dumps, and a small tree with mem_banks and io_links written for
# umem (tests/fuzz/kfd_seeds; its format is in fuzz_kfd_topology.cpp).
cp "$fixtures"/kfd_* "$root"/tests/fuzz/kfd_seeds/* "$work/kfd_topology/"
[[ -d $work/alloc_conf ]] && cp "$root"/tests/fuzz/alloc_conf_seeds/* "$work/alloc_conf/"

findings=$build/fuzz-findings
mkdir -p "$findings"
# One libFuzzer process uses one core; each target still gets its full time, and all are
# reported in order once all have ended.
slots=$(nproc)
pids=()
for target in "${targets[@]}"; do
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536
        -print_final_stats=1 -artifact_prefix="$findings/$target-")
  dict=$root/tests/fuzz/$target.dict
  [[ -f $dict ]] && args+=(-dict="$dict")
  while (( $(jobs -rp | wc -l) >= slots )); do wait -n || true; done
  "$build/tests/fuzz/fuzz_$target" "${args[@]}" "$work/$target" >"$work/$target.log" 2>&1 &
  pids+=($!)
done
status=0
for k in "${!targets[@]}"; do
  target=${targets[$k]}
  log=$work/$target.log
  if wait "${pids[$k]}"; then
    runs=$(grep -m1 'stat::number_of_executed_units' "$log" | awk '{print $2}')
    corpus=$(find "$work/$target" -type f | wc -l)
    echo "fuzz_$target: no finding in ${seconds}s ($runs runs, corpus $corpus inputs)"
  else
    echo "fuzz_$target: FINDING (input kept in $findings/)" >&2
    tail -n 60 "$log" >&2
    status=1
  fi
done
exit $status
