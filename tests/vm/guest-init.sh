#!/bin/busybox sh
# shellcheck shell=dash
# /init of the VM suite's initramfs (PID 1, busybox only). Runs every program listed in
# /etc/umem-vm/programs ("name args...", binary /tests/name) with the environment of
# /etc/umem-vm/env, and reports over the serial console with markers run-vm-suite.sh parses:
#   === UMEMVM BOOTED uptime=S ===, === UMEMVM BEGIN name ===,
#   === UMEMVM PASS name === or === UMEMVM FAIL name rc=N ===, === UMEMVM END rc=N uptime=S ===
# Then it powers off; QEMU runs with -no-reboot, so a panic also ends the VM (with no END).
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev  # DEVTMPFS_MOUNT is off in Debian's kernel
mount -t tmpfs tmpfs /tmp
# shellcheck source=/dev/null  # written by run-vm-suite.sh
. /etc/umem-vm/env
uptime_s() { cut -d' ' -f1 /proc/uptime; }
echo "=== UMEMVM BOOTED uptime=$(uptime_s) ==="

rc=0
while read -r name args; do
  [ -n "$name" ] || continue
  echo "=== UMEMVM BEGIN $name ==="
  # A hung program fails alone, with its name, well before the host's timeout for the whole VM.
  # shellcheck disable=SC2086  # args are split on purpose
  timeout "$UMEM_VM_PROGRAM_TIMEOUT" "/tests/$name" $args </dev/null 2>&1
  r=$?
  if [ "$r" -eq 0 ]; then
    echo "=== UMEMVM PASS $name ==="
  else
    echo "=== UMEMVM FAIL $name rc=$r ==="
    rc=1
  fi
done </etc/umem-vm/programs

echo "=== UMEMVM END rc=$rc uptime=$(uptime_s) ==="
poweroff -f
