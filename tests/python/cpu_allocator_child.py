"""Run by test_cpu_allocator.py in a fresh process: one scenario of umem as PyTorch's CPU
allocator. Prints one JSON line. argv: package folder, scenario."""
import io
import json
import os
import signal
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402
import umem.torch as ut  # noqa: E402
from umem import _extension  # noqa: E402

scenario = sys.argv[2]
signal.alarm(240)  # a hang ends the process instead of the test run


def is_umem(t):
    return ut.gpu_access(t)["umem"]


def tensors():
    before = torch.ones(1000)
    in_force_before = _extension.load("cpu").in_force()
    ut.enable_host()
    saved = io.BytesIO()
    torch.save(torch.arange(100.0), saved)
    saved.seek(0)
    dataset = torch.utils.data.TensorDataset(torch.arange(32.0).view(8, 4))
    made = {
        "randn": torch.randn(1000),
        "zeros": torch.zeros(64, 64),
        "matmul": torch.ones(128, 128) @ torch.ones(128, 128),
        "clone": before.clone(),
        "large": torch.empty(64 << 20, dtype=torch.uint8),
        "small": torch.empty(3, dtype=torch.int8),
        "torch_load": torch.load(saved),
        "dataloader_batch": next(iter(torch.utils.data.DataLoader(dataset, batch_size=4)))[0],
        "linear_weight": torch.nn.Linear(17, 33).weight,
    }
    values_ok = (float(made["matmul"][0, 0]) == 128.0 and float(made["clone"].sum()) == 1000.0
                 and float(made["torch_load"].sum()) == 4950.0
                 and float(made["dataloader_batch"].sum()) == sum(range(16)))
    out = {"in_force_before": in_force_before, "host_enabled": ut.host_enabled(),
           "before_is_umem": is_umem(before),
           "umem": {k: is_umem(v) for k, v in made.items()},
           "misaligned": [k for k, v in made.items() if v.data_ptr() % 64],
           "values_ok": values_ok,
           "empty_numel0_ptr": torch.empty(0).data_ptr()}
    del before, made  # PyTorch's tensor and umem's, each freed by its own deleter
    return out


def statistics():
    ut.enable_host()

    def stats():
        s = ut.memory_stats("cpu")
        return (s["allocation.all.current"], s["allocated_bytes.all.current"],
                s["reserved_bytes.all.current"], s["allocated_bytes.all.peak"])
    allocations_before, bytes_before, _, _ = stats()
    held = [torch.empty(1 << 20, dtype=torch.uint8) for _ in range(10)]
    allocations_during, bytes_during, reserved_during, _ = stats()
    del held
    allocations_after, _, _, peak_after = stats()
    cpu, everything = ut.memory_stats("cpu"), ut.memory_stats(-1)
    return {"allocations_before": allocations_before, "bytes_before": bytes_before,
            "allocations_during": allocations_during, "bytes_during": bytes_during,
            "reserved_during": reserved_during, "allocations_after": allocations_after,
            "peak_after": peak_after,
            "cpu_keys_match_all": cpu["allocation.all.current"]
            == everything["allocation.all.current"]}


def twice():
    ut.enable_host()
    ut.enable_host()
    try:
        ut.enable_host(spill="warn")
        late = "no error"
    except ut.UmemTorchError as e:
        late = str(e)
    return {"second_call": "ok", "late_options": late}


def out_of_memory():
    ut.enable_host(limit_total="64MiB")
    try:
        torch.empty(256 << 20, dtype=torch.uint8)
        error_type, message = None, ""
    except RuntimeError as e:
        error_type, message = type(e).__name__, str(e)
    small = torch.ones(1 << 10)
    return {"error_type": error_type, "message": message,
            "small_after_ok": float(small.sum()) == 1024.0}


def address_space_limit():
    import resource
    ut.enable_host()
    with open("/proc/self/status") as f:
        in_use = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmSize:"))
    # ulimit -v as a batch system may set it: far below umem's reservations of 256 GiB.
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]  # kept: only privilege may raise it
    resource.setrlimit(resource.RLIMIT_AS, (in_use + (2 << 30), hard))
    made = [torch.ones(n, dtype=torch.uint8) for n in (16 << 20, 64 << 20, 200 << 20)]
    return {"numel_ones": [int(t.count_nonzero()) for t in made],
            "umem": [is_umem(t) for t in made]}


def profiler():
    ut.enable_host()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                profile_memory=True) as prof:
        x = torch.ones(1 << 20, dtype=torch.uint8)
        del x
    events = [e for e in prof.key_averages() if e.key == "aten::empty"]
    return {"empty_memory": sum(e.cpu_memory_usage for e in events)}


class Made(torch.utils.data.Dataset):
    """Tensors made in the worker (by the CPU allocator there), filled with their index."""

    def __len__(self):
        return 32

    def __getitem__(self, i):
        t = torch.full((64,), float(i))
        return t, is_umem(t)


def workers():
    ut.enable_host()
    loader = torch.utils.data.DataLoader(Made(), batch_size=4, num_workers=2,
                                         multiprocessing_context="fork", timeout=60)
    sums, worker_umem, batch_umem = [], True, False
    for batch, umem_flags in loader:
        sums.append(float(batch.sum()))
        worker_umem = worker_umem and bool(umem_flags.all())
        batch_umem = batch_umem or is_umem(batch)
    return {"batch_sums": sorted(sums), "worker_tensors_umem": worker_umem,
            "batches_umem_in_main": batch_umem}


print(json.dumps({"tensors": tensors, "statistics": statistics, "twice": twice,
                  "out_of_memory": out_of_memory, "workers": workers,
                  "address_space_limit": address_space_limit,
                  "profiler": profiler}[scenario]()))
