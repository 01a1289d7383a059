#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer project with
# find_package(umem), and runs the installed umtopo.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/umtopo"
test -f "$tmp/prefix/include/umem/core/topology.hpp"
ls "$tmp"/prefix/lib*/cmake/umem/umemConfig.cmake >/dev/null
"$tmp/prefix/bin/umtopo" --version
cmake -S "$src_dir/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$(dirname "$(ls "$tmp"/prefix/lib*/libumem.so)")" "$tmp/consumer/consumer"
