#!/usr/bin/env bash
# Configures and builds one flavour of umem. Usage: scripts/build.sh [release|asan|tsan] [TARGET...]
# Prints the build directory on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
case "$flavour" in
  release) dir=build/release; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  asan) dir=build/asan; args=(-DCMAKE_BUILD_TYPE=Debug -DUMEM_SANITIZE=address,undefined) ;;
  tsan) dir=build/tsan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DUMEM_SANITIZE=thread) ;;
  *) echo "build.sh: unknown flavour '$flavour' (release, asan, tsan)" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" -G Ninja -DUMEM_WERROR=ON "${args[@]}" >/dev/null
shift || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j 2 "${targets[@]}"
echo "$dir"
