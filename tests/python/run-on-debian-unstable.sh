#!/usr/bin/env bash
# The Python tests against a current PyTorch: Debian unstable's python3-torch (2.14.1 when
# written), in a root made with debootstrap, where umem is built with that root's compiler (GCC
# 16) and the tests run as the ctest entry python.pytest runs them. Debian 12's PyTorch 1.13 is
# the main suite's; this one runs what umem's CPU side does with a PyTorch of today.
# Needs root (debootstrap, chroot, bind mounts) and Debian's mirror; about 10 minutes on 2 cores,
# 2.5 GB of disk. The root is kept for the next run (delete it to start anew).
#
#   tests/python/run-on-debian-unstable.sh [--prepare] [root-dir]   (default build/debian-unstable)
# --prepare only makes the root (mostly downloading: scripts/test.sh runs it beside the builds).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "$here/../.." && pwd)"
shared="$(cd "$src/../shared" 2>/dev/null && pwd || true)"
prepare=0
if [ "${1:-}" = --prepare ]; then prepare=1; shift; fi
root="${1:-$src/build/debian-unstable}"
mkdir -p "$(dirname "$root")"
root="$(cd "$(dirname "$root")" && pwd)/$(basename "$root")"

packages=python3-torch,libtorch-dev,python3-dev,pybind11-dev,python3-pytest,python3-numpy,cmake,ninja-build,g++,pkg-config,libhwloc-dev,libnuma-dev,libspdlog-dev,nlohmann-json3-dev,libcli11-dev,libgtest-dev,libgmock-dev,libhsa-runtime-dev,zlib1g-dev
if [ ! -f "$root/.made" ]; then
  command -v debootstrap > /dev/null || { echo "run-on-debian-unstable: debootstrap is missing" >&2; exit 1; }
  rm -rf "$root"
  debootstrap --variant=minbase --include="$packages" unstable "$root" http://deb.debian.org/debian \
    > "$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log" >&2; exit 1; }
  # The downloaded packages (about 0.4 GB) are installed: nothing reads them again.
  rm -f "$root"/var/cache/apt/archives/*.deb
  touch "$root/.made"
fi
[ "$prepare" = 1 ] && { echo "run-on-debian-unstable: root ready at $root"; exit 0; }

# The source, the shared captures, and what PyTorch and umem read of the machine (/proc, /sys).
mounts=()
mount_into() {
  mkdir -p "$root$2"
  mount --bind "$1" "$root$2"
  mounts=("$root$2" "${mounts[@]}")
}
cleanup() { for m in "${mounts[@]}"; do umount "$m" || true; done; }
trap cleanup EXIT
mount_into "$src" /umem
[ -n "$shared" ] && mount_into "$shared" /shared
mount_into /proc /proc
mount_into /sys /sys
mount_into /dev /dev

echo "run-on-debian-unstable: $(chroot "$root" sh -c 'g++ --version | head -n 1'), PyTorch" \
  "$(chroot "$root" python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
chroot "$root" sh -c '
  set -e
  cmake -S /umem -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DUMEM_BUILD_BENCHMARKS=OFF \
    > /build.configure.log 2>&1 || { tail -20 /build.configure.log; exit 1; }
  cmake --build /build -j 2 --target umem_torch umtopo umem_rocr_double umem_hip_double \
    > /build.log 2>&1 || { grep -m 20 -E "error|FAILED" /build.log; exit 1; }
  cd /umem
  UMEM_TORCH_LIBRARY=/build/python/umem/libumem_torch.so UMEM_UMTOPO=/build/tools/umtopo/umtopo \
  UMEM_FIXTURES_DIR=/shared/fixtures/machines PYTHONDONTWRITEBYTECODE=1 \
  UMEM_ROCR_DOUBLE=/build/tests/rocr_double/libumem_rocr_double.so \
  UMEM_HIP_DOUBLE=/build/tests/hip_double/libumem_hip_double.so \
    python3 -m pytest -p no:cacheprovider -q -rs -m "not hardware" /umem/tests/python'
