"""umem: NUMA-correct unified memory for APU nodes (MI300A), from Python.

    umem.topology()            the machine's topology model as a dict (or a snapshot's)
    umem.torch                 PyTorch integration (imported on first use; needs torch)

Environment: UMEM_TORCH_LIBRARY (path of libumem_torch.so, read by this package),
UMEM_ALLOC_CONF, UMEM_LOG_LEVEL, UMEM_GPU_BACKEND (read by the library; `umtopo --options`).
docs/torch-bridge.md describes the PyTorch semantics.
"""
import importlib
import json
import os

from . import _lib
from ._lib import UmemError

__all__ = ["topology", "UmemError", "torch"]


def _snapshot_text(snapshot):
    """JSON text of a snapshot given as a dict, a JSON string, or a path; None for this machine."""
    if snapshot is None:
        return None
    if isinstance(snapshot, dict):
        return json.dumps(snapshot)
    if isinstance(snapshot, (str, os.PathLike)) and os.path.exists(snapshot):
        with open(snapshot, encoding="utf-8") as f:
            return f.read()
    if isinstance(snapshot, str) and snapshot.lstrip().startswith("{"):
        return snapshot
    raise ValueError(f"umem: snapshot {snapshot!r} is neither a dict, JSON text nor an existing "
                     "file (write one with `umtopo --capture FILE`)")


def topology(snapshot=None):
    """The topology model (the snapshot schema of `umtopo --capture`) as a dict: this machine's,
    or that of `snapshot` (dict, JSON text or file path), validated by umem's loader."""
    text = _snapshot_text(snapshot)
    return _lib.take_json(_lib.lib().umem_torch_topology_json(
        None if text is None else text.encode()))


def __getattr__(name):
    if name == "torch":  # lazily: `import umem` must work without PyTorch
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'umem' has no attribute {name!r}")
