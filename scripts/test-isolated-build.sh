#!/usr/bin/env bash
# `pip install .` as on a machine with PyPI: with build isolation (pip builds in an environment
# holding only pyproject.toml's build requirements, fetched from an index) into a virtual
# environment that sees nothing of the system's Python packages, then `import umem` and the
# `umtopo` command from it, with no umem variable set. No machine here reaches PyPI, so the index
# is a folder of Debian's own wheels: setuptools' (python3-setuptools-whl) and one packed here
# from python3-wheel's module (Debian ships that one unpacked only). What this cannot show is a
# newer setuptools than Debian's; pyproject.toml keeps to fields both old and new ones accept.
# setup.py's CMake build folder (build/pip) is the one the offline install used before, so the
# C++ is rebuilt only where it changed: what is new here is the isolated Python side.
# Usage: scripts/test-isolated-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
index=$work/index
mkdir -p "$index"
cp /usr/share/python-wheels/setuptools-*.whl "$index/"
/usr/bin/python3 - "$index" <<'PY'
# A wheel (PEP 427) of the installed `wheel` distribution: its module, its metadata, a RECORD.
import base64, hashlib, importlib.metadata as md, os, sys, zipfile
dist = md.distribution("wheel")
name = f"wheel-{dist.version}"
info = f"{name}.dist-info"
import wheel
top = os.path.dirname(os.path.dirname(wheel.__file__))
files = {}
for root, dirs, names in os.walk(os.path.dirname(wheel.__file__)):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    for n in names:
        path = os.path.join(root, n)
        with open(path, "rb") as fh:
            files[os.path.relpath(path, top)] = fh.read()
files[f"{info}/METADATA"] = (dist.read_text("METADATA") or dist.read_text("PKG-INFO")).encode()
files[f"{info}/entry_points.txt"] = (dist.read_text("entry_points.txt") or "").encode()
files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: umem\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
record = []
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{info}/RECORD,,")
files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
with zipfile.ZipFile(os.path.join(sys.argv[1], f"{name}-py3-none-any.whl"), "w") as z:
    for path, data in files.items():
        z.writestr(path, data)
PY
/usr/bin/python3 -m venv "$work/venv"
# --isolated: no pip configuration or PIP_* variable of this machine.
"$work/venv/bin/python" -m pip --isolated install -q --no-index --find-links "$index" .
cd "$work"  # not the source tree: `import umem` must find the installed package
env -u UMEM_TORCH_LIBRARY -u UMEM_UMTOPO -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import os, sys, umem
assert umem.__file__.startswith(sys.prefix), f"umem from {umem.__file__}, not the venv"
from umem import _lib
lib = os.path.realpath(_lib.library_path())
assert lib.startswith(os.path.realpath(os.path.dirname(umem.__file__))), f"not the package's: {lib}"
t = umem.topology()
print(f"isolated build: import umem from {os.path.dirname(umem.__file__)}, "
      f"{len(t['numa']['nodes'])} NUMA node(s), library {os.path.basename(lib)}")
PY
env -u UMEM_TORCH_LIBRARY -u UMEM_UMTOPO -u PYTHONPATH "$work/venv/bin/umtopo" > "$work/umtopo.txt"
echo "isolated build: umtopo printed $(wc -l < "$work/umtopo.txt") lines"
