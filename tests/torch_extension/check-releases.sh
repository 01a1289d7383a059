#!/usr/bin/env bash
# Compiles umem's PyTorch allocator extension (torch_bridge/extension) against the headers of
# PyTorch releases other than the one installed: Debian 13's libtorch-cuda-dev 2.6.0 and Debian
# unstable's libtorch-dev 2.14.1, fetched with a private apt configuration and unpacked with
# dpkg -x (nothing is installed into the system), with the CUDA toolkit's headers. Each release
# is compiled as torch.utils.cpp_extension would (its C++ standard), with -Wsuggest-override: the
# methods GCC names there are the ones that override PyTorch's in that release, which must be
# exactly the release's list in overrides-<version>.txt (Note [PyTorch releases] in
# torch_bridge/extension/torch_compat.hpp). What this checks: names, signatures and which
# interface each release has. What it does not: the ABI of a real build, linking, running.
#
#   tests/torch_extension/check-releases.sh [work-dir]   (default build/torch-releases)
# Env: CUDA_HOME (default /usr/local/cuda). Exits 0 when every release compiles as expected.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${1:-$root/build/torch-releases}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

# release, Debian package and version, suite, C++ standard cpp_extension uses for it.
releases=(
  "2.6.0 libtorch-cuda-dev 2.6.0+dfsg-7+b1 c++17"
  "2.14.1 libtorch-dev 2.14.1+dfsg-1 c++20"
)

[ -f "$cuda/include/cuda_runtime_api.h" ] || {
  echo "check-releases: no CUDA headers in $cuda/include (set CUDA_HOME)" >&2; exit 1; }
python_include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
[ -f "$python_include/Python.h" ] || { echo "check-releases: no Python.h (python3-dev)" >&2; exit 1; }
[ -f /usr/include/pybind11/pybind11.h ] || { echo "check-releases: no pybind11 (pybind11-dev)" >&2; exit 1; }

apt_dir="$work/apt"
apt_opts=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
          -o "APT::Get::List-Cleanup=0" -o "Debug::NoLocking=1")
fetch() {  # package version -> the unpacked tree's usr/include
  local package=$1 version=$2 tree="$work/$1_$2"
  if [ ! -d "$tree/usr/include" ]; then
    if [ ! -f "$apt_dir/lists/.updated" ]; then
      mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
      printf '%s\n' \
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main contrib" \
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main contrib" \
        > "$apt_dir/sources.list"
      apt-get "${apt_opts[@]}" update -qq
      touch "$apt_dir/lists/.updated"
    fi
    (cd "$work" && apt-get "${apt_opts[@]}" download -qq "$package=$version" 2>/dev/null)
    mkdir -p "$tree"
    dpkg -x "$work/${package}_${version/:/%3a}_amd64.deb" "$tree"
  fi
  echo "$tree/usr/include"
}

status=0
for r in "${releases[@]}"; do
  read -r release package version std <<< "$r"
  include="$(fetch "$package" "$version")"
  log="$work/$release.log"
  # Debian's packages omit the generated c10/cuda/impl/cuda_cmake_macros.h; c10 lets a build
  # without it say so (C10_CUDA_NO_CMAKE_CONFIGURE_FILE, as its ROCm build does).
  if ! LC_ALL=C g++ -std="$std" -fsyntax-only -Wall -Wextra -Werror -Wno-error=suggest-override \
      -Wsuggest-override -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE -DTORCH_EXTENSION_NAME=umem_check \
      -isystem "$include" -isystem "$include/torch/csrc/api/include" -isystem "$cuda/include" \
      -isystem "$python_include" -I"$root/torch_bridge/include" -I"$root/allocator/include" \
      "$root/torch_bridge/extension/umem_cuda_allocator.cpp" > "$log" 2>&1; then
    echo "check-releases: PyTorch $release: the extension does not compile:"; grep -m 20 error "$log"
    status=1; continue
  fi
  # "'virtual void {anonymous}::umem_cuda_allocator::emptyCache()' can be marked override"
  sed -n "s/.*'virtual [^']*umem_cuda_allocator::\([^']*\)' can be marked override.*/\1/p" "$log" \
    | sed 's/{anonymous}:://g' | sort -u > "$work/$release.overrides"
  if diff -u "$here/overrides-$release.txt" "$work/$release.overrides"; then
    echo "check-releases: PyTorch $release ($package $version, $std): compiles; its own forms override"
  else
    echo "check-releases: PyTorch $release: the forms that override differ from overrides-$release.txt (above)"
    status=1
  fi
done
exit "$status"
