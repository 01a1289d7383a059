#!/usr/bin/env bash
# The multi-NUMA VM suite: boots Debian's own kernel under QEMU (TCG, never KVM) with 4 NUMA
# nodes shaped like a 4-socket MI300A node (CPUs and memory on every node, uneven node sizes,
# SLIT 10 local / 32 remote) and runs umem's statically linked test programs in it, once.
#
# Usage: tests/vm/run-vm-suite.sh [--build-dir DIR] [--no-build]
#   --build-dir DIR  static build to use (default build/vm-static); configured and built here
#                    with -DUMEM_STATIC_TESTS=ON unless --no-build is given
#   --no-build       use DIR as it is (the ctest test `vm.numa4` does this)
# Environment:
#   CI=true                  a QEMU that cannot run is a failure, not a skip
#   UMEM_VM_TIMEOUT          seconds before a hung VM is killed (default 150)
#   UMEM_VM_PROGRAM_TIMEOUT  seconds per guest program (default 180)
#   UMEM_VM_NODE_MIB         memory per node, comma-separated (default 1024,1024,768,1280)
#   UMEM_VM_CACHE            kernel cache (default DIR/vm/kernel); UMEM_VM_KERNEL, UMEM_VM_NO_PVH:
#                            see fetch-kernel.sh
# Exit: 0 every guest program passed, 1 anything else, 77 QEMU cannot run here (skip; not on CI).
#
# Pass means, on the serial console: a PASS marker for every program, umtopo's report showing
# every node and the 10/32 matrix, and `=== UMEMVM END rc=0`. A crash, panic or hang fails with
# the console log printed (and kept in DIR/vm/console.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
t_start=$(date +%s.%N)
span() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }  # seconds from $1 to $2

dir=$repo/build/vm-static
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run-vm-suite: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work=$dir/vm
mkdir -p "$work"

# --- Can QEMU run here? The only reason to skip, and never on CI.
on_ci=0
case "${CI:-}" in true | TRUE | True | 1) on_ci=1 ;; esac
qemu="qemu-system-x86_64"
why=""
if ! command -v "$qemu" >/dev/null; then
  why="$qemu is not installed (Debian: apt-get install qemu-system-x86)"
else
  probe_rc=0
  echo quit | timeout 30 "$qemu" -machine none -accel tcg -display none -nodefaults \
    -no-user-config -monitor stdio >"$work/qemu-probe.log" 2>&1 || probe_rc=$?
  [ "$probe_rc" -eq 0 ] ||
    why="$qemu cannot start (status $probe_rc): $(tail -n 3 "$work/qemu-probe.log" | tr '\n' ' ')"
fi
if [ -n "$why" ]; then
  if [ "$on_ci" = 1 ]; then
    echo "run-vm-suite: FAIL: $why; on CI the VM suite must run" >&2
    exit 1
  fi
  echo "run-vm-suite: SKIP: $why"
  exit 77
fi

# --- The guest's shape.
node_mib=${UMEM_VM_NODE_MIB:-1024,1024,768,1280}
IFS=, read -r -a sizes <<<"$node_mib"
nodes=${#sizes[@]}
local_dist=10
remote_dist=32
total_mib=0
for s in "${sizes[@]}"; do total_mib=$((total_mib + s)); done

# --- Static programs.
if [ "$build" = 1 ]; then
  # -O0 -g0: the programs do little computing and this compiles fastest on a 2-core CI machine.
  cmake -S "$repo" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O0 -g0" \
    "-DCMAKE_C_FLAGS_DEBUG=-O0 -g0" -DUMEM_STATIC_TESTS=ON -DUMEM_BUILD_TESTS=ON \
    -DUMEM_WERROR=ON >/dev/null
fi
if ! grep -qs '^UMEM_STATIC_TESTS:BOOL=ON' "$dir/CMakeCache.txt"; then
  echo "run-vm-suite: $dir is not a build configured with -DUMEM_STATIC_TESTS=ON" >&2
  exit 1
fi
# umem_placement_checks joins by itself as soon as its target exists.
targets=(umtopo umem_vm_guest_tests umem_numa_tests)
grep -qs "^build umem_placement_checks: phony" "$dir/build.ninja" &&
  targets+=(umem_placement_checks)
if [ "$build" = 1 ]; then
  if ! cmake --build "$dir" -j 2 --target "${targets[@]}" >"$work/build.log" 2>&1; then
    cat "$work/build.log"
    echo "run-vm-suite: building ${targets[*]} failed" >&2
    exit 1
  fi
  # Static glibc's linker notes on dlopen/getaddrinfo are expected (cmake/umem_static.cmake).
  grep -v -e "requires at runtime the shared" -e "in function \`" "$work/build.log" || true
fi
t_built=$(date +%s.%N)

programs=$work/programs
: >"$programs"
for t in "${targets[@]}"; do
  path=$(find "$dir" -type f -name "$t" -not -path '*/CMakeFiles/*' | head -n 1)
  [ -n "$path" ] || { echo "run-vm-suite: $t is not built in $dir" >&2; exit 1; }
  echo "$path" >>"$programs"
done
# umtopo's default report is a summary table; check_umtopo below reads the full one.
sed -i 's|/umtopo$|/umtopo --verbose|' "$programs"

# --- Kernel and initramfs.
cache=${UMEM_VM_CACHE:-$work/kernel}
mkdir -p "$cache"
kernel=$("$here/fetch-kernel.sh" "$cache")
t_kernel=$(date +%s.%N)

fixtures=$(sed -n 's/^UMEM_FIXTURES_DIR:PATH=//p' "$dir/CMakeCache.txt")
extra_dirs=("$repo/data")
[ -n "$fixtures" ] && [ -d "$fixtures" ] && extra_dirs+=("$fixtures")
cat >"$work/env" <<EOF
export HOME=/tmp GTEST_COLOR=no
export UMEM_VM_EXPECT_NODES=$nodes UMEM_VM_CPUS_PER_NODE=1
export UMEM_VM_DISTANCES=$local_dist,$remote_dist UMEM_VM_NODE_MIB=$node_mib
export UMEM_VM_PROGRAM_TIMEOUT=${UMEM_VM_PROGRAM_TIMEOUT:-180}
EOF
[ -n "$fixtures" ] && echo "export UMEM_FIXTURES_DIR=$fixtures" >>"$work/env"
"$here/make-initramfs.sh" "$work/initramfs.cpio" "$work/env" "$programs" "${extra_dirs[@]}"
t_initrd=$(date +%s.%N)

# --- Boot. TCG only: nested KVM is broken on the CI machine type (numa-vm-recipe.md).
numa_args=()
for ((i = 0; i < nodes; i++)); do
  numa_args+=(-object "memory-backend-ram,id=m$i,size=${sizes[i]}M"
              -numa "node,nodeid=$i,memdev=m$i,cpus=$i")
done
for ((i = 0; i < nodes; i++)); do  # QEMU mirrors each pair (j, i); nodes must come first
  for ((j = i + 1; j < nodes; j++)); do
    numa_args+=(-numa "dist,src=$i,dst=$j,val=$remote_dist")
  done
done
timeout_s=${UMEM_VM_TIMEOUT:-150}
console=$work/console.log
echo "run-vm-suite: booting $(basename "$kernel"): $nodes nodes of $node_mib MiB," \
  "SLIT $local_dist/$remote_dist, programs: ${targets[*]}"
t_boot=$(date +%s.%N)
set +e
timeout --foreground -k 5 "$timeout_s" "$qemu" -accel tcg -cpu max -nodefaults -no-user-config \
  -no-reboot -display none -serial stdio -m "${total_mib}M" \
  -smp "$nodes,sockets=$nodes,cores=1,threads=1" "${numa_args[@]}" \
  -kernel "$kernel" -initrd "$work/initramfs.cpio" -append "console=ttyS0 quiet panic=-1" \
  </dev/null >"$console" 2>&1
qemu_rc=$?
set -e
t_end=$(date +%s.%N)

# --- Verdict. The serial console gives CRLF, and firmware escape codes precede the first line.
log=$work/console.txt
tr -d '\r' <"$console" | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' >"$log"
failures=()
fail() { failures+=("$1"); }

if [ "$qemu_rc" -eq 124 ] || [ "$qemu_rc" -eq 137 ]; then
  fail "the VM did not finish within ${timeout_s} s (hang): killed"
elif [ "$qemu_rc" -ne 0 ]; then
  fail "QEMU exited with status $qemu_rc"
fi
grep -qE 'Kernel panic|Oops:|BUG: ' "$log" && fail "the guest kernel panicked or oopsed"

# umtopo's report, from the console: every node, and the distance matrix exactly.
check_umtopo() {
  local out header row i j
  out=$(awk '/^=== UMEMVM BEGIN umtopo ===$/ {on = 1; next} /^=== UMEMVM / {on = 0} on' "$log" |
        sed -e 's/^ *//' -e 's/  */ /g')
  grep -q "^umtopo: $nodes NUMA nodes," <<<"$out" || fail "umtopo does not report $nodes NUMA nodes"
  header="node"
  for ((i = 0; i < nodes; i++)); do
    header+=" $i"
    grep -qx "Socket on NUMA node $i" <<<"$out" || fail "umtopo shows no socket on NUMA node $i"
  done
  grep -qx "$header" <<<"$out" || fail "umtopo's distance header is not '$header'"
  for ((i = 0; i < nodes; i++)); do
    row="$i"
    for ((j = 0; j < nodes; j++)); do
      if [ "$i" -eq "$j" ]; then row+=" $local_dist"; else row+=" $remote_dist"; fi
    done
    grep -qx "$row" <<<"$out" || fail "umtopo's distance row $i is not '$row'"
  done
}

if grep -q '^=== UMEMVM BOOTED' "$log"; then
  for t in "${targets[@]}"; do
    grep -qx "=== UMEMVM PASS $t ===" "$log" && continue
    status=$(grep -o "UMEMVM FAIL $t rc=[0-9]*" "$log" || echo "it never finished")
    fail "$t: no PASS marker ($status)"
  done
  grep -qx '=== UMEMVM END rc=0 uptime=[0-9.]* ===' "$log" || fail "no '=== UMEMVM END rc=0' marker"
  check_umtopo
else
  fail "the guest never reached /init (kernel or initramfs problem)"
fi

# --- Report: the whole console (every program's gtest output), then the timings and verdict.
echo "----- guest console ($console) -----"
cat "$log"
echo "----- end of guest console -----"
booted=$(sed -n 's/^=== UMEMVM BOOTED uptime=\([0-9.]*\) ===$/\1/p' "$log")
ended=$(sed -n 's/^=== UMEMVM END rc=[0-9]* uptime=\([0-9.]*\) ===$/\1/p' "$log")
programs_s="?"
[ -n "$booted" ] && [ -n "$ended" ] && programs_s=$(span "$booted" "$ended")
echo "run-vm-suite: times (s): build $(span "$t_start" "$t_built"), kernel" \
  "$(span "$t_built" "$t_kernel"), initramfs $(span "$t_kernel" "$t_initrd"), VM $(span "$t_boot" \
  "$t_end") (guest uptime at /init ${booted:-?}, guest programs $programs_s), total" \
  "$(span "$t_start" "$t_end")"
if [ "${#failures[@]}" -gt 0 ]; then
  printf 'run-vm-suite: FAIL: %s\n' "${failures[@]}"
  exit 1
fi
echo "run-vm-suite: PASS: ${targets[*]} on $nodes NUMA nodes"
