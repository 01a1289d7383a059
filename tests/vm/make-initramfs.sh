#!/usr/bin/env bash
# Builds the VM suite's initramfs: static busybox, guest-init.sh as /init, the test programs.
# Usage: make-initramfs.sh OUT.cpio ENV_FILE PROGRAMS_FILE [DIR...]
#   ENV_FILE       sourced by /init before the programs run (export lines)
#   PROGRAMS_FILE  one "/host/path/program args..." a line; each program must be static
#   DIR            copied to the same absolute path in the guest (fixtures the tests read)
# The archive is left uncompressed: gunzip under TCG costs more than loading a bigger file.
set -euo pipefail
out=${1:?usage: make-initramfs.sh OUT.cpio ENV_FILE PROGRAMS_FILE [DIR...]}
env_file=${2:?}
programs_file=${3:?}
shift 3
here=$(cd "$(dirname "$0")" && pwd)

busybox=$(command -v busybox || true)
if [ -z "$busybox" ] || readelf -l "$busybox" | grep -q 'Requesting program interpreter'; then
  echo "make-initramfs: a static busybox is needed: apt-get install busybox-static" >&2
  exit 1
fi

root=$(mktemp -d "${out%/*}/.initramfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/tests" "$root/etc/umem-vm"
cp "$busybox" "$root/bin/busybox"
cp "$here/guest-init.sh" "$root/init"
cp "$env_file" "$root/etc/umem-vm/env"
: >"$root/etc/umem-vm/programs"
while read -r path args; do
  [ -n "$path" ] || continue
  if readelf -l "$path" | grep -q 'Requesting program interpreter'; then
    echo "make-initramfs: $path is dynamically linked; build with -DUMEM_STATIC_TESTS=ON" >&2
    exit 1
  fi
  name=$(basename "$path")
  cp "$path" "$root/tests/$name"
  echo "$name $args" >>"$root/etc/umem-vm/programs"
done <"$programs_file"
for dir in "$@"; do
  abs=$(cd "$dir" && pwd -P)
  mkdir -p "$root$abs"
  cp -a "$abs/." "$root$abs/"
done
(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$out.tmp"
mv "$out.tmp" "$out"
