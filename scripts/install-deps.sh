#!/usr/bin/env bash
# Installs umem's build and test dependencies from Debian 12 packages. Idempotent: packages
# already present are left alone, and apt is not touched when nothing is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang pkg-config libclang-rt-14-dev
  libhwloc-dev hwloc libnuma-dev numactl libspdlog-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libjemalloc-dev libmimalloc-dev libhsa-runtime-dev
  zlib1g-dev librsvg2-bin
  qemu-system-x86 busybox-static cpio xz-utils debootstrap
  python3-torch libtorch-dev python3-torchvision python3-pytest python3-numpy python3-dev pybind11-dev
  python3-venv python3-pip python3-setuptools python3-wheel python3-setuptools-whl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
