#!/usr/bin/env bash
# The whole test suite, as CI runs it: dependencies, a warnings-as-errors build with all tests,
# the PyTorch extension compiled against other PyTorch releases' headers, `pip install .` into a
# fresh virtual environment with the Python tests against the installed package, `pip install .`
# as on a machine with PyPI (build isolation), the Python tests with Debian unstable's PyTorch in a
# debootstrap root, the same build under
# AddressSanitizer + UndefinedBehaviorSanitizer, the allocator under ThreadSanitizer, the
# placement checks on a 4-NUMA-node VM, and bounded fuzzing.
# Env: UMEM_FUZZ_SECONDS (default 10 per target, which keeps CI within its hour); UMEM_SKIP_{UNSTABLE,ASAN,TSAN,VM,FUZZ}=1 skip a
# stage; UMEM_KEEP_STAGE_OUTPUTS=1 keeps each stage's build for the next run (below).
# The VM stage skips only where QEMU cannot run, and fails instead under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
free_disk() { df -h --output=avail . | tail -n 1 | tr -d ' '; }
trap 'echo "test.sh: a stage failed (line $LINENO); free disk here: $(free_disk)" >&2' ERR
# Each stage's heading names the seconds since the start and the free disk, so a slow stage or a
# filling disk shows in CI's log.
stage() { echo "== $* (at ${SECONDS} s, $(free_disk) free)"; }
# Kept, the stages' builds and the unstable root add up to 7 GiB, more than some CI machines have
# free. A stage's own build, which no later stage reads, goes once the stage passed, so a run needs
# about 4 GiB at its peak (the release build, the unstable root or the ASan build beside it). The
# release build stays: it is the one the README's other commands use.
discard() {
  [ "${UMEM_KEEP_STAGE_OUTPUTS:-0}" = 1 ] && return
  local d
  for d in "$@"; do
    # The unstable root has the source and /proc, /sys, /dev bound into it while its tests run:
    # never delete through a mount that outlived them.
    if awk -v d="$(realpath -m "$d")" 'index($5 "/", d "/") == 1 { found = 1 } END { exit !found }' \
         /proc/self/mountinfo; then
      echo "test.sh: $d still has a mount inside; not deleting it" >&2
      return 1
    fi
    rm -rf "$d"
  done
}
scripts/install-deps.sh
# Line tables are all the sanitizers' reports need; full debug info makes every build of this
# script a fifth slower.
export UMEM_CMAKE_ARGS="-DUMEM_LINE_TABLES_ONLY=ON ${UMEM_CMAKE_ARGS:-}"

# Debian unstable's root is mostly a download: it is made beside the builds and waited for at its
# stage.
if [ "${UMEM_SKIP_UNSTABLE:-0}" != 1 ]; then
  mkdir -p build
  tests/python/run-on-debian-unstable.sh --prepare > build/unstable-root.log 2>&1 &
  unstable_root=$!
fi

stage "release build + tests"
dir=$(scripts/build.sh release | tail -n 1)
ctest --test-dir "$dir" --output-on-failure -j 2

stage "the PyTorch extension against PyTorch 2.6.0 and 2.14.1 headers (Debian's packages)"
tests/torch_extension/check-releases.sh
discard build/torch-releases

stage "pip install . + the Python tests against the installed package"
scripts/test-installed-package.sh "$dir"

stage "pip install . with build isolation into a bare virtual environment, as with PyPI"
scripts/test-isolated-build.sh

if [ "${UMEM_SKIP_UNSTABLE:-0}" != 1 ]; then
  stage "the Python tests with Debian unstable's PyTorch, in a debootstrap root"
  wait "$unstable_root" || { cat build/unstable-root.log >&2; exit 1; }
  tests/python/run-on-debian-unstable.sh
  discard build/debian-unstable
fi

if [ "${UMEM_SKIP_ASAN:-0}" != 1 ]; then
  stage "ASan+UBSan build + tests"
  dir=$(scripts/build.sh asan | tail -n 1)
  # intercept_tls_get_addr=0: the GPU runtime doubles are dlopen'ed and dlclose'd as the real
  # runtimes are, and at exit LeakSanitizer (GCC 12's libasan) walks the dynamic TLS it recorded
  # for them, now freed: its tracer faults on the stale entry ("Tracer caught signal 11") and the
  # test aborts although it passed. Leaks are still checked; umem's own libraries are linked at
  # start, so their thread_locals are static TLS, which LeakSanitizer scans either way.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$dir" --output-on-failure -j 2
  discard "$dir"
fi

if [ "${UMEM_SKIP_TSAN:-0}" != 1 ]; then
  stage "ThreadSanitizer: machine, allocator and torch bridge tests"
  dir=$(scripts/build.sh tsan umem_machine_tests umem_allocator_tests umem_torch_bridge_tests |
        tail -n 1)
  # The fault-injection sweeps run one thread (and under ASan above): nothing for TSan to see.
  # So do the forked-child tests of the GPU mappers: the child makes the pool index's
  # shared_mutex, locked by the atfork prepare handler, anew (allocator/src/fork_guard.cpp: glibc's
  # rwlock cannot be unlocked there), which GCC 12's TSan does not see, so it reports the child's
  # first read lock of it. The release and ASan stages run them.
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir "$dir" -L 'machine|allocator|torch_bridge' \
    -E 'FaultInjection\.EveryUpstreamCallMayFailOnce|ForkedChildOn' --output-on-failure -j 2
  discard "$dir"
fi

if [ "${UMEM_SKIP_VM:-0}" != 1 ]; then
  stage "multi-NUMA VM suite (4 nodes under QEMU)"
  tests/vm/run-vm-suite.sh || [ $? -eq 77 ]
  discard build/vm-static
fi

if [ "${UMEM_SKIP_FUZZ:-0}" != 1 ]; then
  stage "fuzzers (bounded)"
  scripts/run-fuzzers.sh build/fuzz "${UMEM_FUZZ_SECONDS:-10}"
  discard build/fuzz
fi
echo "test.sh: all stages passed in ${SECONDS} s"
