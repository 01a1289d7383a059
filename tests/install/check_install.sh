#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds and runs a consumer project with
# find_package(umem), and runs the installed umtopo. Only public headers are installed (no detail/
# folder, none of the torch bridge's C++ headers), every one compiles on its own, and libumem.so
# exports umem's symbols only (cmake/umem.map).
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build_dir" --prefix "$tmp/prefix" >/dev/null
test -x "$tmp/prefix/bin/umtopo"
test -f "$tmp/prefix/include/umem/core/topology.hpp"
ls "$tmp"/prefix/lib*/cmake/umem/umemConfig.cmake >/dev/null
internal=$(cd "$tmp/prefix/include" && find umem \( -name detail -o -name torch_bridge \) | head -n 3)
if [ -n "$internal" ]; then
  echo "check_install: internal headers were installed: $internal" >&2; exit 1
fi
broken=0
while IFS= read -r header; do
  case $header in
    *.h) compile=("${CC:-cc}" -x c -std=c11) ;;
    *) compile=("${CXX:-c++}" -x c++ -std=c++20) ;;
  esac
  printf '#include <%s>\n' "$header" > "$tmp/header.src"
  if ! "${compile[@]}" -fsyntax-only -I"$tmp/prefix/include" "$tmp/header.src" \
       2> "$tmp/header.err"; then
    echo "check_install: the installed $header does not compile on its own:" >&2
    grep -m 1 error "$tmp/header.err" >&2 || cat "$tmp/header.err" >&2
    broken=1
  fi
done < <(cd "$tmp/prefix/include" && find umem -name '*.hpp' -o -name '*.h' | sort)
[ "$broken" = 0 ] || exit 1
foreign=$(nm -D --defined-only -C "$(ls "$tmp"/prefix/lib*/libumem.so)" | cut -d' ' -f3- |
          grep -v -e '^umem_' -e '^umem::' -e ' for umem::' -e '^non-virtual thunk to umem::' || true)
if [ -n "$foreign" ]; then
  echo "check_install: libumem.so exports symbols outside umem's API:" >&2
  echo "$foreign" | head -n 5 >&2; exit 1
fi
"$tmp/prefix/bin/umtopo" --version
cmake -S "$src_dir/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$(dirname "$(ls "$tmp"/prefix/lib*/libumem.so)")" "$tmp/consumer/consumer"
