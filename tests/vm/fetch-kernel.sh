#!/usr/bin/env bash
# Fetches Debian's own kernel for the VM suite and prints the path of the image to boot.
# Usage: fetch-kernel.sh CACHE_DIR
#
# The package is the one linux-image-amd64 currently depends on (apt-cache depends), fetched with
# `apt-get download` and unpacked (./boot only, nothing is installed) into CACHE_DIR/<package>/.
# A cached package is reused. The XZ payload of vmlinuz is also unpacked to an ELF vmlinux, which
# QEMU boots through PVH: that skips 5-6 s of in-guest XZ decompression under TCG. If that fails
# the bzImage is used. UMEM_VM_KERNEL=/path/to/image skips all of this (non-Debian hosts).
set -euo pipefail
cache=${1:?usage: fetch-kernel.sh CACHE_DIR}

if [ -n "${UMEM_VM_KERNEL:-}" ]; then
  if [ ! -f "$UMEM_VM_KERNEL" ]; then
    echo "fetch-kernel: UMEM_VM_KERNEL=$UMEM_VM_KERNEL does not exist" >&2
    exit 1
  fi
  echo "$UMEM_VM_KERNEL"
  exit 0
fi

command -v apt-cache >/dev/null || {
  echo "fetch-kernel: apt-cache not found: this needs a Debian host, or set UMEM_VM_KERNEL" >&2
  exit 1
}
resolve() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'
}
pkg=$(resolve)
as_root=0
[ "$(id -u)" -eq 0 ] && as_root=1
if [ -z "$pkg" ] && [ "$as_root" = 1 ]; then
  apt-get update -qq >&2
  pkg=$(resolve)
fi
[ -n "$pkg" ] || {
  echo "fetch-kernel: apt-cache does not know linux-image-amd64: run apt-get update" >&2
  exit 1
}

dir=$cache/$pkg
if ! ls "$dir"/boot/vmlinuz-* >/dev/null 2>&1; then
  tmp=$(mktemp -d "$cache/.fetch.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  apt_opts=()
  [ "$as_root" = 1 ] && apt_opts=(-o APT::Sandbox::User=root)  # else apt warns it is unsandboxed
  download() { (cd "$tmp" && apt-get download -qq "${apt_opts[@]}" "$pkg" >&2); }
  if ! download; then
    # The package lists may name a version the mirror no longer has.
    [ "$as_root" = 1 ] || { echo "fetch-kernel: apt-get download $pkg failed" >&2; exit 1; }
    apt-get update -qq >&2
    pkg=$(resolve)
    dir=$cache/$pkg
    download || { echo "fetch-kernel: apt-get download $pkg failed" >&2; exit 1; }
  fi
  mkdir -p "$tmp/unpacked"
  dpkg-deb --fsys-tarfile "$tmp"/"$pkg"_*.deb | tar -x -C "$tmp/unpacked" ./boot
  rm -rf "$dir"
  mkdir -p "$dir"
  mv "$tmp/unpacked/boot" "$dir/boot"
  echo "fetch-kernel: cached $pkg in $dir" >&2
fi
vmlinuz=$(find "$dir/boot" -name 'vmlinuz-*' | head -n 1)

if [ "${UMEM_VM_NO_PVH:-0}" != 1 ]; then
  vmlinux=$dir/vmlinux
  if [ ! -s "$vmlinux" ]; then
    # The first XZ stream header in the bzImage is the compressed kernel (KERNEL_XZ=y on Debian).
    off=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1 || true)
    if [ -n "$off" ] &&
       # tail dies of SIGPIPE when xz stops at the end of the stream: not a failure.
       { tail -c +$((off + 1)) "$vmlinuz" || true; } | xz -dc --single-stream >"$vmlinux.tmp" &&
       [ "$(head -c 4 "$vmlinux.tmp" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; then
      mv "$vmlinux.tmp" "$vmlinux"
    else
      rm -f "$vmlinux.tmp"
      echo "fetch-kernel: could not unpack an ELF vmlinux from $vmlinuz; booting the bzImage" >&2
    fi
  fi
  [ -s "$vmlinux" ] && { echo "$vmlinux"; exit 0; }
fi
echo "$vmlinuz"
