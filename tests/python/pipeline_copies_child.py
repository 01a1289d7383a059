"""Run by test_pipeline_copies.py in a fresh process on the ROCr and HIP doubles (one MI300A; see
hip_double_process.py): a training input pipeline as a ROCm PyTorch user writes it, counting the
copies it makes. argv: package root, HIP double, ROCr double, "umem" (umem.torch.enable_host()
first) or "pytorch" (PyTorch's CPU allocator), number of DataLoader workers (forked; each sample
is made in the worker). Prints one JSON line.

The pipeline, per batch: a DataLoader (without workers the batch is collated in this process;
with workers in shared memory, Python's multiprocessing) ->
pin_memory() (what the DataLoader's pin step calls for each tensor,
torch/utils/data/_utils/pin_memory.py) -> .to("cuda") -> a Linear model moved with .to("cuda"),
all inside zero_copy(). What is real: PyTorch's DataLoader and collate, umem's CPU allocator and
bridge on the doubles (each batch's memory, its GPU visibility, its registration with HIP), and
zero_copy()'s decisions. The stand-in: a CPU-only PyTorch cannot make a CUDA tensor, so
zero_copy's GPU side (_target.as_device) returns a CPU view of the same memory, and
torch.cuda.is_available() answers True; the decisions it records are those a GPU build makes.
PyTorch's own copies (its pin_memory, its .to("cuda")) cannot run here: each is counted where
zero_copy() decides to copy, and without umem ("pytorch": no zero_copy() either) where PyTorch's
own rules copy. HIP's view of each batch (hipPointerGetAttributes on the double) says
whether PyTorch for ROCm's own pin_memory() would return the tensor itself in any thread, the
DataLoader's pin thread included."""
import gc
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hip_double_process import attach, is_pinned, unregisters  # noqa: E402

hip = attach(sys.argv[2], sys.argv[3])
mode = sys.argv[4]
workers = int(sys.argv[5])

import torch  # noqa: E402
import umem.torch as ut  # noqa: E402
import umem.torch.zero_copy_mode as zc  # noqa: E402
from umem.torch import host_tensors  # noqa: E402

if mode == "umem":
    ut.enable_host()


class GpuStandIn(zc._Target):
    gpu_available = staticmethod(lambda: True)
    as_device = staticmethod(lambda t, device=None: t.detach())


zc._target = GpuStandIn()
torch.cuda.is_available = lambda: True

torch.manual_seed(0)
model = torch.nn.Linear(64, 8)


class Samples(torch.utils.data.Dataset):
    """Each sample made where it is asked for: in a forked worker, by its CPU allocator."""

    def __len__(self):
        return 256

    def __getitem__(self, i):
        return torch.full((64,), float(i)), i % 8


loader = torch.utils.data.DataLoader(Samples(), batch_size=32, num_workers=workers,
                                     **({"multiprocessing_context": "fork", "timeout": 60}
                                        if workers else {}))
copies = {"pin_memory": 0, "to": 0}
aliases = 0
same_memory = True
total = 0.0
pinned_for_hip = []
pinned_after_pin = []  # what PyTorch for ROCm's is_pinned() says of what pin_memory() returned
reasons = set()
reason_texts = set()  # whole
x_pinned = x_gpu = None
# PyTorch's own copies (pin_memory, .to("cuda")) raise on a CPU-only build: counted, not run.
CANNOT_COPY = (RuntimeError, AssertionError)
if mode == "pytorch":
    # Without umem (no zero_copy() either), what PyTorch for ROCm does: Tensor.pin_memory() returns
    # the tensor itself only when is_pinned() (aten/src/ATen/native/Memory.cpp), else copies;
    # .to("cuda") and Module.to("cuda") always make new GPU tensors (copies).
    model_copies, model_aliases, alias_count = len(list(model.parameters())), 0, 0
    for x, y in loader:
        pinned = is_pinned(hip, x.data_ptr())
        pinned_for_hip.append(pinned)
        if not pinned:
            copies["pin_memory"] += 1
            reasons.add("PyTorch's pin_memory copies memory HIP does not know as pinned")
        copies["to"] += 1
        total += float(x.sum())
else:
    with ut.zero_copy() as log:
        try:
            model = model.to("cuda")
        except CANNOT_COPY:  # the first parameter's copy: the others are not reached
            pass
        model_events = list(log.events)
        for x, y in loader:
            pinned_for_hip.append(is_pinned(hip, x.data_ptr()))
            events = len(log.events)
            try:
                x_pinned = x.pin_memory()
                pinned_after_pin.append(is_pinned(hip, x_pinned.data_ptr()))
                x_gpu = x_pinned.to("cuda")
            except CANNOT_COPY:
                x_pinned = x_gpu = None
            for operation, kind, reason in log.events[events:]:
                if kind == "copy":
                    copies[operation] += 1
                    reasons.add(reason.split(":")[0])
                    reason_texts.add(reason)
            total += float(x.sum())
            if x_gpu is not None:
                same_memory = same_memory and x_gpu.data_ptr() == x.data_ptr()
                model(x_gpu).sum()
    model_copies = len([e for e in model_events if e[1] == "copy"])
    model_aliases = len(model_events) - model_copies
    alias_count = len(log.aliases)
# The last batch's memory, once it and its aliases are gone: still known to HIP only if a
# registration outlived its alias (umem's own segments stay registered while cached).
last_batch = x.data_ptr()
del x, x_pinned, x_gpu
gc.collect()
host_tensors._releases.settle()  # Note [Deferred releases]
print(json.dumps({"batches": len(loader), "sum_ok": total == 64.0 * sum(range(256)), "copies": copies, "reasons": sorted(reasons),
                  "reason_texts": sorted(reason_texts),
                  "model_copies": model_copies, "model_aliases": model_aliases,
                  "aliases": alias_count, "same_memory": same_memory,
                  "pinned_for_hip": pinned_for_hip, "pinned_after_pin": pinned_after_pin,
                  "last_batch_known": hip.umem_hip_double_known(last_batch),
                  **unregisters(hip),
                  "batch_umem": ut.gpu_access(next(iter(loader))[0])["umem"]}))
