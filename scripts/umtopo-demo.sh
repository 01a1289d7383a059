#!/usr/bin/env bash
# The main job: install dependencies, build, and run umtopo on this machine. Where no AMD GPU
# driver is present (no /dev/kfd), also run it on the bundled real 4-socket MI300A capture.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
dir=$(scripts/build.sh release | tail -n 1)
umtopo="$dir/tools/umtopo/umtopo"

echo "== umtopo on this machine"
"$umtopo"
echo "== umtopo check on this machine"
"$umtopo" check || true

if [ ! -e /dev/kfd ]; then
  caps=data/machines
  echo
  echo "== No AMD GPU driver here (/dev/kfd absent): umtopo on a real 4-socket MI300A capture"
  replay=(--rocminfo "$caps/rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt"
          --kfd-properties "$caps/kfd_topology_properties_mi300a_4socket_unidentified_repo.txt")
  "$umtopo" "${replay[@]}"
  echo "== umtopo check on that capture (exit 1 = errors found, as expected for a default MI300A)"
  "$umtopo" check "${replay[@]}" || [ $? -eq 1 ]
fi
