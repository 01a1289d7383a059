"""Run by test_hip_interop.py in a fresh process on the ROCr and HIP doubles (one MI300A; see
hip_double_process.py): memory umem did not allocate inside zero_copy(): a numpy array and a
read-only np.load(mmap_mode="r") map, each through pin_memory() as a ROCm PyTorch user writes it.
A 1 KiB array shows foreign_alias_min (4 MiB by default). What is real: numpy's memory, the bridge's registration with the HIP double (hipHostRegister over
the ROCr double's locks) and zero_copy()'s decisions. The stand-in: a CPU-only PyTorch has no GPU,
so zero_copy() is told a GPU is there, and PyTorch's own pin_memory() (a copy) raises and is
counted where zero_copy() decides to copy. argv: package root, HIP double, ROCr double, a folder
for the .npy file. Prints one JSON line."""
import gc
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hip_double_process import attach, is_pinned, unregisters  # noqa: E402

hip = attach(sys.argv[2], sys.argv[3])

import numpy as np  # noqa: E402
import torch  # noqa: E402
import umem.torch as ut  # noqa: E402
import umem.torch.zero_copy_mode as zc  # noqa: E402
from umem.torch import host_tensors  # noqa: E402
from umem.torch import UmemTorchError  # noqa: E402


class GpuStandIn(zc._Target):
    gpu_available = staticmethod(lambda: True)


zc._target = GpuStandIn()
out = {}

array = np.arange(1 << 20, dtype=np.float32)  # 4 MiB of numpy's own memory
t = torch.from_numpy(array)
out["access"] = ut.gpu_access(t)
with ut.zero_copy() as log:
    pinned = t.pin_memory()
out["events"] = log.events
out["same_memory"] = pinned.data_ptr() == t.data_ptr()
out["pinned_for_hip"] = is_pinned(hip, pinned.data_ptr())
pinned[0] = 42.0  # one memory: numpy sees the write
out["numpy_sees_write"] = float(array[0]) == 42.0
out["known_while_aliased"] = hip.umem_hip_double_known(t.data_ptr())
del pinned
gc.collect()
# The release waits for the GPU, so it is made on the releases' thread (Note [Deferred releases]).
host_tensors._releases.settle()
out["known_after"] = hip.umem_hip_double_known(t.data_ptr())
out.update(unregisters(hip))



def pin_events(tensor):
    """What zero_copy() decided for tensor.pin_memory(); PyTorch's own copy raises here."""
    with ut.zero_copy() as log:
        try:
            tensor.pin_memory()
        except (RuntimeError, AssertionError):  # PyTorch's own copy on a CPU-only build
            pass
    return log.events


out["small_events"] = pin_events(torch.from_numpy(np.ones(256, dtype=np.float32)))  # 1 KiB

path = os.path.join(sys.argv[4], "weights.npy")
np.save(path, np.ones(1 << 20, dtype=np.float32))  # 4 MiB
mapped = torch.from_numpy(np.load(path, mmap_mode="r"))  # read-only: PyTorch warns, and maps it
out["read_only_events"] = pin_events(mapped)
out["read_only_known"] = hip.umem_hip_double_known(mapped.data_ptr())
try:
    with ut.zero_copy(strict=True):
        mapped.pin_memory()
    out["strict"] = "no error"
except UmemTorchError as e:
    out["strict"] = str(e)
print(json.dumps(out))
