#!/usr/bin/env bash
# Runs the Python tests on the GPU machine, from binaries staged here by stage-gpu-bundle.sh
# (carried as build/torch-bundle). Writes the full log to $OUT/gpu-tests.log when $OUT is set.
# Usage: run-gpu-tests-on-h200.sh [TEST PATH...]   (default: every test under tests/python)
# Exit: 0 all passed; 1 a test failed; 2 the bundle cannot load here; 3 umem memory is not
# GPU-accessible on this machine (the GPU tests would only skip: the CUDA backend is needed).
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=build/torch-bundle
log=${OUT:-/tmp}/gpu-tests.log
exec > >(tee "$log") 2>&1
py=${PYTHON:-python3}

[ -f "$bundle/lib/libumem_torch.so" ] || { echo "RESULT: no bundle at $bundle (run stage-gpu-bundle.sh and carry it)"; exit 2; }
export LD_LIBRARY_PATH="$PWD/$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UMEM_TORCH_LIBRARY="$PWD/$bundle/lib/libumem_torch.so"
export UMEM_UMTOPO="$PWD/$bundle/bin/umtopo"
export PYTHONDONTWRITEBYTECODE=1
echo "== machine"; nvidia-smi -L 2>&1 | head -n 8; cat "$bundle/BUILD_INFO"; ldd --version | head -n 1
"$py" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
if ! "$py" -c "import pytest" 2>/dev/null; then
  echo "pytest not installed here: using the bundled copy"
  export PYTHONPATH="$PWD/$bundle/site${PYTHONPATH:+:$PYTHONPATH}"
fi
echo "== loading the bridge"
if ldd "$UMEM_TORCH_LIBRARY" 2>&1 | grep -E "(libstdc|libgcc_s|GLIBCXX|CXXABI).*not found"; then
  echo "this machine's C++ runtime is older than the build's: using the bundled libstdc++"
  export LD_LIBRARY_PATH="$PWD/$bundle/libcxx:$LD_LIBRARY_PATH"
fi
if ldd "$UMEM_TORCH_LIBRARY" 2>&1 | grep -E "not found"; then
  echo "RESULT: libumem_torch.so cannot load on this machine (see above)"; exit 2
fi
"$py" - <<'PY' || exit 2
import sys; sys.path.insert(0, "python")
import umem
print(umem._lib.take_string(umem._lib.lib().umem_torch_describe()))
t = umem.topology()
print("GPU backend:", t.get("gpu_backend"), "GPUs:", sum(a["kind"] == "gpu" for a in t["agents"]))
PY
echo "== GPU visibility of umem memory"
"$py" - <<'PY'
import sys; sys.path.insert(0, "python")
import umem.torch as ut
a = ut.gpu_access(ut.empty(16, node=ut.memory_stats(0).get("umem.numa_node", 0)))
print("GPU-accessible:", a["accessible"], "-", a["reason"])
sys.exit(0 if a["accessible"] else 3)
PY
visible=$?
if [ "$visible" -ne 0 ]; then
  echo "RESULT: umem memory is NOT GPU-accessible here, so PyTorch kernels cannot use it; the GPU"
  echo "tests would all skip. This needs the CUDA backend (cudaHostRegister of umem segments)."
  echo "== CPU-side tests only"
  "$py" -m pytest -p no:cacheprovider -q -rs -m "not gpu" tests/python
  exit 3
fi
echo "== GPU tests (own process: umem is enabled before anything touches the GPU)"
"$py" -m pytest -p no:cacheprovider -v -rs -m gpu "${@:-tests/python}"; gpu_rc=$?
echo "== the other tests"
"$py" -m pytest -p no:cacheprovider -q -rs -m "not gpu" "${@:-tests/python}"; cpu_rc=$?
echo "RESULT: gpu tests exit $gpu_rc, other tests exit $cpu_rc"
# pytest exits 5 when it collected nothing: GPU-only files hold no other tests, which is no failure.
[ "$gpu_rc" -eq 0 ] && { [ "$cpu_rc" -eq 0 ] || [ "$cpu_rc" -eq 5 ]; }
