#!/usr/bin/env bash
# Stages what the GPU machine needs to run the Python tests without building there, into the
# git-ignored folder build/torch-bundle: libumem_torch.so and the shared libraries it needs
# beyond glibc (spdlog, fmt, hwloc, numa, udev, libstdc++...), the umtopo binary with its own,
# and Debian's pure-Python pytest for an image that lacks it. Usage (from the repository root):
#   tests/python/stage-gpu-bundle.sh [BUILD_DIR]    (default build/torch, already built)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/torch}
out=build/torch-bundle
lib=$build/python/umem/libumem_torch.so
umtopo=$build/tools/umtopo/umtopo
for f in "$lib" "$umtopo"; do
  [ -f "$f" ] || { echo "stage-gpu-bundle: $f is missing: cmake --build $build --target umem_torch umtopo" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/lib" "$out/libcxx" "$out/bin" "$out/site"
cp "$lib" "$out/lib/"
cp -r "$build/python/umem/extension" "$out/lib/"  # umem's PyTorch allocator extension, built there
cp "$umtopo" "$out/bin/"
# The ldd closure minus glibc's own libraries (the device's glibc must be used).
for f in "$lib" "$umtopo"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r so; do
  case "$(basename "$so")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*) ;;
    # Used only where the device's own C++ runtime is older (run-gpu-tests-on-h200.sh decides).
    libstdc++.so*|libgcc_s.so*) cp -L "$so" "$out/libcxx/" ;;
    *) cp -L "$so" "$out/lib/" ;;
  esac
done
for p in pytest _pytest pluggy iniconfig py py.py packaging; do
  cp -r "/usr/lib/python3/dist-packages/$p" "$out/site/"
done
# Debug info would exceed the carry limit (64 MiB).
strip --strip-debug "$out"/lib/*.so* "$out"/libcxx/*.so* "$out/bin/umtopo"
echo "glibc of this build: $(ldd --version | head -n 1)" > "$out/BUILD_INFO"
du -sh "$out" | awk '{print "stage-gpu-bundle: " $1 " in " $2}'
ls "$out/lib"
