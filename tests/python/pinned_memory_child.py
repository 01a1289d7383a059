"""Run by test_gpu_pinned_memory.py in a fresh process on a GPU machine: umem.torch.enable(host=True)
(umem as PyTorch's GPU, CPU and, from 2.8, pinned-memory allocator), then one scenario. Prints
one JSON line. argv: package folder, scenario ("pinned", "graph", "host_stats" or "in_flight"), and for "in_flight"
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


def graph():
    """Pinned memory allocated and freed inside a CUDA graph capture, then a fresh pinned tensor
    filled with -1 before the replays: the captured copy must still read the captured block."""
    ut.enable(host=True)
    x = torch.ones(4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch's docs do it
        (x * 2).sum()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    active = lambda: ut.memory_stats("cpu")["active.all.current"]  # noqa: E731
    before = active()
    with torch.cuda.graph(g):
        staged = torch.full((4096,), 3.0, pin_memory=True)
        address = staged.data_ptr()
        out = x + staged.to("cuda", non_blocking=True)
        del staged
    kept = active() - before  # the freed block is the graph pool's until the graph goes
    others = [torch.full((4096,), -1.0, pin_memory=True) for _ in range(4)]
    reused = sum(o.data_ptr() == address for o in others)
    wrong = 0
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        wrong += int((out != 4.0).sum())
    del others
    with_graph = active() - before
    g.reset()
    return {"torch": torch.__version__, "pinned_enabled": ut.pinned_enabled(), "kept": kept,
            "reused": reused, "wrong": wrong, "with_graph": with_graph,
            "after_reset": active() - before}


# torch.cuda.host_memory_stats() keys and the umem.torch.memory_stats("cpu") keys they report
# (Note [Pinned memory allocator]); releases differ in which of the first they have.
HOST_KEYS = {"active_requests.current": "active.all.current",
             "active_bytes.current": "active_bytes.all.current",
             "allocations.current": "segment.all.current",
             "allocated_bytes.current": "reserved_bytes.all.current",
             "allocated_bytes.peak": "reserved_bytes.all.peak",
             "num_host_alloc": "num_device_alloc", "num_host_free": "num_device_free"}


def host_stats():
    """torch.cuda.host_memory_stats() against umem's own host statistics, with a pinned block."""
    ut.enable(host=True)
    torch.cuda.init()  # host_memory_stats() answers {} before PyTorch initialized CUDA
    block = torch.empty(40960, dtype=torch.uint8, pin_memory=True)
    theirs = torch.cuda.host_memory_stats()
    mine = ut.memory_stats("cpu")
    del block
    torch.cuda.reset_peak_host_memory_stats()
    reset = torch.cuda.host_memory_stats()
    return {"torch": torch.__version__, "pinned_enabled": ut.pinned_enabled(),
            "keys": sorted(theirs),
            "pytorch": {k: theirs[k] for k in HOST_KEYS if k in theirs},
            "umem": {k: mine[u] for k, u in HOST_KEYS.items() if k in theirs},
            "reset": {k: reset[k] for k in ("allocated_bytes.current", "allocated_bytes.peak")
                      if k in reset}}


scenarios = {"pinned": pinned, "graph": graph, "host_stats": host_stats}
result = in_flight(sys.argv[3]) if scenario == "in_flight" else scenarios[scenario]()
print(json.dumps(result))
