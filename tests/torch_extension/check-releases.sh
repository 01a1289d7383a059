#!/usr/bin/env bash
# Compiles umem's PyTorch allocator extensions (torch_bridge/extension) against the headers of
# PyTorch releases other than the one installed, the GPU one for CUDA and for ROCm builds, the CPU
# one (umem_cpu_allocator.cpp, c10 only) once per release: Debian 13's
# libtorch-cuda-dev 2.6.0 and Debian unstable's libtorch-dev 2.14.1, fetched with a private apt
# configuration and unpacked with dpkg -x (nothing is installed into the system).
#   CUDA: with the CUDA toolkit's headers, as torch.utils.cpp_extension compiles it (the release's
#     C++ standard).
#   ROCm: as PyTorch's ROCm build and cpp_extension do it: the release's own hipify (pure Python,
#     torch/utils/hipify of Debian's python3-torch of that release: 1.0 in 2.6, 2.0 in 2.14) turns
#     the CUDA-side headers into the c10/hip and ATen/hip tree, a stub stands in for the generated
#     ATen/hip/HIPConfig.h, hipify then converts the extension as cpp_extension does
#     (is_pytorch_extension=True), and g++ compiles it with HIP's headers from Debian unstable
#     (libamdhip64-dev and libhsa-runtime-dev, ROCm 6.4), -D__HIP_PLATFORM_AMD__ -DUSE_ROCM.
# Each compile uses -Wsuggest-override: the methods GCC names there are the ones that override
# PyTorch's in that release and build, which must be exactly the list in
# overrides-<version>[-rocm].txt (Note [PyTorch releases] in torch_bridge/extension/
# torch_compat.hpp). What this checks: names, signatures, hipify's renaming, which interface each
# release has. What it does not: the ABI of a real build, a real ROCm or CUDA install (their
# generated headers are stubbed or left out), linking, running.
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

# release, Debian package and version of its headers, of its Python package (hipify), C++
# standard cpp_extension uses for it.
releases=(
  "2.6.0 libtorch-cuda-dev 2.6.0+dfsg-7+b1 2.6.0+dfsg-7 c++17"
  "2.14.1 libtorch-dev 2.14.1+dfsg-1 2.14.1+dfsg-1 c++20"
)
hip_version=6.4.3-5
hsa_version=6.4.3+dfsg-5

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

# compile <release> <build: cuda|rocm> <source> <include dirs...>: the forms that override, in
# $work/<release>-<build>.overrides, compared with the expected list.
compile() {
  local release=$1 build=$2 source=$3 std=$4; shift 4
  local log="$work/$release-$build.log" flags=() expected
  [ "$build" = rocm ] && flags=(-D__HIP_PLATFORM_AMD__=1 -DUSE_ROCM=1)
  local includes=()
  for d in "$@"; do includes+=(-isystem "$d"); done
  # Debian's packages omit the generated c10/cuda/impl/cuda_cmake_macros.h; c10 lets a build
  # without it say so (C10_CUDA_NO_CMAKE_CONFIGURE_FILE, as its ROCm build does).
  if ! LC_ALL=C g++ -std="$std" -fsyntax-only -Wall -Wextra -Werror -Wno-error=suggest-override \
      -Wsuggest-override -DC10_CUDA_NO_CMAKE_CONFIGURE_FILE -DTORCH_EXTENSION_NAME=umem_check \
      "${flags[@]}" "${includes[@]}" -isystem "$python_include" \
      -I"$(dirname "$source")/include" -I"$(dirname "$source")" "$source" > "$log" 2>&1; then
    echo "check-releases: PyTorch $release ($build): the extension does not compile:"
    grep -m 20 -E "error|fatal" "$log"
    return 1
  fi
  # "'virtual void {anonymous}::umem_cuda_allocator::emptyCache()' can be marked override"; the
  # pinned-memory allocator's (at::HostAllocator's, 2.8 on) listed with its class name.
  { sed -n "s/.*'virtual [^']*umem_cuda_allocator::\([^']*\)' can be marked override.*/\1/p" "$log"
    sed -n "s/.*'virtual [^']*umem_extension::\(pinned_memory_allocator::[^']*\)' can be marked override.*/\1/p" "$log"
  } | sed 's/{anonymous}:://g' | sort -u > "$work/$release-$build.overrides"
  expected="$here/overrides-$release$([ "$build" = rocm ] && echo -rocm).txt"
  if ! diff -u "$expected" "$work/$release-$build.overrides"; then
    echo "check-releases: PyTorch $release ($build): the forms that override differ from $(basename "$expected") (above)"
    return 1
  fi
  echo "check-releases: PyTorch $release ($build, $std): compiles; its own forms override"
}

# compile_cpu <release> <std> <include dirs...>: the CPU extension; its overriding forms must be
# allocate and copy_data where the release declares them as it does (Note [CPU allocator]).
compile_cpu() {
  local release=$1 std=$2; shift 2
  local log="$work/$release-cpu.log" includes=()
  for d in "$@"; do includes+=(-isystem "$d"); done
  if ! LC_ALL=C g++ -std="$std" -fsyntax-only -Wall -Wextra -Werror -Wno-error=suggest-override \
      -Wsuggest-override -DTORCH_EXTENSION_NAME=umem_check "${includes[@]}" \
      -isystem "$python_include" -I"$root/torch_bridge/include" -I"$root/allocator/include" \
      "$root/torch_bridge/extension/umem_cpu_allocator.cpp" > "$log" 2>&1; then
    echo "check-releases: PyTorch $release (cpu): the CPU extension does not compile:"
    grep -m 20 -E "error|fatal" "$log"
    return 1
  fi
  local found
  found="$(sed -n "s/.*'virtual [^']*umem_cpu_allocator::\([a-z_]*\)(.*' can be marked override.*/\1/p" \
    "$log" | sort -u | tr '\n' ' ')"
  if [ "$found" != "allocate copy_data " ]; then
    echo "check-releases: PyTorch $release (cpu): expected allocate and copy_data to override, GCC names: $found"
    return 1
  fi
  echo "check-releases: PyTorch $release (cpu, $std): the CPU extension compiles; allocate and copy_data override"
}
# hipify <python3-torch tree> <project dir> <is_pytorch_extension> [extension source dir]
hipify() {
  python3 - "$@" <<'PY'
import glob, os, sys
torch_tree, project, extension = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.path.insert(0, glob.glob(os.path.join(torch_tree, "usr/lib/python3/dist-packages/torch/utils"))[0])
from hipify import hipify_python
if extension:
    source = sys.argv[4]
    hipify_python.hipify(project_directory=project, output_directory=project,
                         header_include_dirs=[os.path.join(source, "include"), source],
                         extra_files=[os.path.join(source, "umem_cuda_allocator.cpp")], ignores=[],
                         show_detailed=False, show_progress=False, is_pytorch_extension=True)
else:  # PyTorch's own ROCm build turns these trees into c10/hip, ATen/hip
    hipify_python.hipify(project_directory=project, output_directory=project,
                         includes=[os.path.join(project, d, "*")
                                   for d in ("c10/cuda", "ATen/cuda", "torch/csrc/cuda")],
                         ignores=[], show_detailed=False, show_progress=False,
                         is_pytorch_extension=False)
PY
}

hip_include="$(fetch libamdhip64-dev "$hip_version")"
hsa_include="$(fetch libhsa-runtime-dev "$hsa_version")"
stubs="$work/stubs"
mkdir -p "$stubs/ATen/hip"
# What PyTorch's ROCm build generates from ATen/cuda/CUDAConfig.h.in: a ROCm build without cuDNN
# or MAGMA.
printf '%s\n' '#pragma once' '#define AT_CUDNN_ENABLED() 0' '#define AT_CUSPARSELT_ENABLED() 0' \
  '#define AT_HIPSPARSELT_ENABLED() 0' '#define AT_ROCM_ENABLED() 1' '#define AT_MAGMA_ENABLED() 0' \
  > "$stubs/ATen/hip/HIPConfig.h"

# The extension's folder as the Python package ships it: the source, its headers, include/umem.
stage() {
  rm -rf "$1" && mkdir -p "$1/include/umem"
  cp "$root"/torch_bridge/extension/*.{cpp,hpp} "$1/"
  cp "$root/torch_bridge/include/umem/umem_torch.h" "$root/allocator/include/umem/umem.h" \
    "$1/include/umem/"
}

status=0
for r in "${releases[@]}"; do
  read -r release package version python_version std <<< "$r"
  include="$(fetch "$package" "$version")"
  stage "$work/cuda-$release"
  compile "$release" cuda "$work/cuda-$release/umem_cuda_allocator.cpp" "$std" \
    "$include" "$include/torch/csrc/api/include" "$cuda/include" || status=1
  compile_cpu "$release" "$std" "$include" "$include/torch/csrc/api/include" || status=1

  torch_tree="$(dirname "$(dirname "$(fetch python3-torch "$python_version")")")"
  rocm_tree="$work/rocm-$release"
  rm -rf "$rocm_tree" && mkdir -p "$rocm_tree/build"
  cp -r "$include" "$rocm_tree/include"
  hipify "$torch_tree" "$rocm_tree/include" 0 > "$work/$release-hipify.log" 2>&1
  stage "$rocm_tree/extension"
  hipify "$torch_tree" "$rocm_tree/build" 1 "$rocm_tree/extension" >> "$work/$release-hipify.log" 2>&1
  compile "$release" rocm "$rocm_tree/extension/umem_hip_allocator.cpp" "$std" "$stubs" \
    "$rocm_tree/include" "$rocm_tree/include/torch/csrc/api/include" "$hip_include" \
    "$hsa_include" || status=1
done
exit "$status"
