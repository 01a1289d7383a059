"""Run by test_gpu_pinned_memory.py in a fresh process on a GPU machine: umem.torch.enable(host=True)
(umem as PyTorch's GPU, CPU and, from 2.8, pinned-memory allocator), then one scenario. Prints
one JSON line. argv: package folder, scenario ("pinned" or "in_flight"), and for "in_flight"
whether umem may be PyTorch's pinned-memory allocator ("umem") or not ("withheld": the extension's
set_pinned_allocator is replaced by one that declines, so the race it guards against shows)."""
import json
import signal
import sys

sys.path.insert(0, sys.argv[1])
import numpy as np  # noqa: E402
import torch  # noqa: E402
import umem.torch as ut  # noqa: E402
from umem import _extension  # noqa: E402

scenario = sys.argv[2]
signal.alarm(240)  # a hang ends the process instead of the test run


def is_umem(t):
    return ut.gpu_access(t)["umem"]


def withhold_pinned_allocator():
    load = _extension.load

    class Declining:
        def __init__(self, module):
            self._module = module

        def __getattr__(self, name):
            return getattr(self._module, name)

        def set_pinned_allocator(self):
            return False

    _extension.load = lambda kind="cuda": Declining(load(kind)) if kind == "cuda" else load(kind)


def pinned():
    ut.enable(host=True)
    fresh = torch.empty(1 << 20, dtype=torch.uint8, pin_memory=True)
    foreign = torch.from_numpy(np.arange(4096, dtype=np.float32))  # numpy's memory, not umem's
    pinned_copy = foreign.pin_memory()
    cpu = torch.arange(4096.0)  # umem's CPU allocator
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.arange(64.0).view(16, 4)), batch_size=4,
        pin_memory=True)
    batch = next(iter(loader))[0]
    return {"torch": torch.__version__, "pinned_enabled": ut.pinned_enabled(),
            "fresh_is_umem": is_umem(fresh), "fresh_is_pinned": fresh.is_pinned(),
            "foreign_is_umem": is_umem(foreign), "copy_is_umem": is_umem(pinned_copy),
            "copy_is_pinned": pinned_copy.is_pinned(),
            "copy_equal": bool(torch.equal(pinned_copy, foreign)),
            "cpu_pin_is_itself": cpu.pin_memory().data_ptr() == cpu.data_ptr(),
            "batch_is_umem": is_umem(batch), "batch_is_pinned": batch.is_pinned()}


def in_flight(mode):
    """non_blocking copies from CPU tensors dropped at once, behind a stream kept busy: the block
    must not be handed to the next CPU tensor (filled with -1) before the copy read it."""
    if mode == "withheld":
        withhold_pinned_allocator()
    ut.enable(host=True)
    n = 16 << 20  # floats: 64 MiB
    wrong = []
    reused = 0
    for i in range(8):
        source = torch.full((n,), float(i))
        address = source.data_ptr()
        torch.cuda._sleep(200_000_000)  # the stream is busy for a while: the copy waits
        on_gpu = source.to("cuda", non_blocking=True)
        del source
        overwrite = torch.full((n,), -1.0)  # the same block, if umem hands it out again
        reused += overwrite.data_ptr() == address
        torch.cuda.synchronize()
        if not bool((on_gpu == float(i)).all()):
            wrong.append(i)
        del overwrite, on_gpu
    return {"torch": torch.__version__, "pinned_enabled": ut.pinned_enabled(), "wrong": wrong,
            "reused": reused}


result = pinned() if scenario == "pinned" else in_flight(sys.argv[3])
print(json.dumps(result))
