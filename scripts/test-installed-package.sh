#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment (offline, Debian's packaging tools; it sees the
# system's torch and pytest), which builds the CPU allocator extension ahead (setup.py), then the
# Python tests against the installed package with no umem variable set (UMEM_TEST_INSTALLED=1 in
# tests/python/conftest.py); the test doubles come from the release build.
# Usage: scripts/test-installed-package.sh [RELEASE_BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv --system-site-packages "$work/venv"
export TORCH_EXTENSIONS_DIR="$work/torch_extensions"
"$work/venv/bin/python" -m pip install --no-build-isolation --no-deps --no-index -q .
# Where umem's own loader would look for the built CPU extension (python/umem/_extension.py).
(cd "$work" && "$work/venv/bin/python" -c '
import os, sys
from umem import _extension as e
name = e.module_name(kind="cpu")
if not os.path.isfile(os.path.join(e.build_directory(name), name + ".so")):
    sys.exit("pip install did not build the CPU allocator extension ahead (setup.py build_torch_extension)")
')
cd "$work"  # not the source tree: `import umem` must find the installed package
env -u UMEM_TORCH_LIBRARY -u UMEM_UMTOPO UMEM_TEST_INSTALLED=1 PYTHONDONTWRITEBYTECODE=1 \
  PATH="$work/venv/bin:$PATH" \
  UMEM_ROCR_DOUBLE="$OLDPWD/$build/tests/rocr_double/libumem_rocr_double.so" \
  UMEM_HIP_DOUBLE="$OLDPWD/$build/tests/hip_double/libumem_hip_double.so" \
  "$work/venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$OLDPWD/tests/python"
