#!/usr/bin/env bash
# Configures and builds one flavour of umem (a preset of CMakePresets.json), warnings as errors as
# in CI. Usage: scripts/build.sh [release|asan|tsan|static|package] [TARGET...]
# Prints the build directory on its last line; the configure and build output go to stderr, so a
# caller that takes the directory with $(...) still shows why a build failed.
# UMEM_CMAKE_ARGS: more -D options for the configure step (as setup.py reads them).
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
case "$flavour" in
  release | asan | tsan | static | package) dir=build/$flavour ;;
  *) echo "build.sh: unknown flavour '$flavour' (release, asan, tsan, static, package)" >&2; exit 2 ;;
esac
read -ra extra <<< "${UMEM_CMAKE_ARGS:-}"
cmake --preset "$flavour" -DUMEM_WERROR=ON "${extra[@]}" >&2
shift || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j 2 "${targets[@]}" >&2
echo "$dir"
