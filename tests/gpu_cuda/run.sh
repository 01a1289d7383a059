#!/usr/bin/env bash
# Runs the H200 proof from a folder made by build.sh: the machine (nvidia-smi), the driver's raw
# answers, umtopo through umem's CUDA backend, the GPU tests and the copy/zero-copy benchmark.
#   tests/gpu_cuda/run.sh DIR [LOG_DIR]
set -uo pipefail
dir=$(realpath "$1")
logs=${2:-.}
export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
{ date -u; nvidia-smi; nvidia-smi -q | grep -iE "product name|bus id|driver version|cuda version|addressing"; } \
  2>&1 | tee "$logs/machine.txt"
"$dir/probe_attributes" 2>&1 | tee "$logs/probe_attributes.txt"
for sys in /sys/bus/pci/devices/*; do
  [ "$(cat "$sys/vendor" 2>/dev/null)" = 0x10de ] &&
    echo "$sys numa_node=$(cat "$sys/numa_node") local_cpus=$(cat "$sys/local_cpus")"
done 2>&1 | tee "$logs/pci_sysfs.txt"
"$dir/umtopo" 2>&1 | tee "$logs/umtopo.txt" || status=1
"$dir/umem_gpu_tests" 2>&1 | tee "$logs/umem_gpu_tests.txt" || status=1
"$dir/umem_cuda_bench" 2>&1 | tee "$logs/umem_cuda_bench.txt" || status=1
exit $status
