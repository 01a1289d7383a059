"""On a real GPU with PyTorch >= 2.0 (run on the lent H200 by run-gpu-tests-on-h200.sh). umem is
enabled once for this process, before anything else touches the GPU, so run these in their own
pytest process: `pytest -m gpu`."""
import gc
import json
import os
import subprocess
import sys

import pytest
import torch

import umem.torch as ut

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("umem_gpu")]
HERE = os.path.dirname(os.path.abspath(__file__))


def node0():
    return ut.memory_stats(0)["umem.numa_node"]


def test_registration_puts_cuda_tensors_in_umem_memory():
    before = ut.memory_stats(0)["allocation.all.current"]
    x = torch.ones(1000, device="cuda")
    assert ut.gpu_access(x)["umem"] is True
    assert ut.memory_stats(0)["allocation.all.current"] == before + 1
    assert torch.cuda.memory_stats(0)["allocation.all.current"] == before + 1  # patched
    assert x.sum().item() == 1000.0
    r = ut.residency(x)
    assert set(r["pages"]["per_node"]) == {str(node0())}


def test_training_loop_matches_default_allocator():
    sys.path.insert(0, HERE)
    import gpu_training
    ours = gpu_training.train()
    ref = subprocess.run([sys.executable, os.path.join(HERE, "gpu_training.py")],
                         capture_output=True, text=True, check=True, timeout=300,
                         env=dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8"))
    theirs = json.loads(ref.stdout.strip().splitlines()[-1])
    assert ours[-1] < ours[0]  # it learns
    assert ours == pytest.approx(theirs, rel=1e-4)


def test_as_device_and_as_host_round_trip_value_by_value():
    n = 1 << 16
    x = ut.empty(n, dtype=torch.float32, node=node0())
    x.copy_(torch.arange(n, dtype=torch.float32))
    y = ut.as_device(x)
    assert y.device.type == "cuda" and y.data_ptr() == x.data_ptr()
    doubled = y * 2
    y.add_(1)  # GPU writes, CPU reads after synchronizing
    torch.cuda.synchronize()
    assert x.tolist() == [float(i + 1) for i in range(n)]
    h = ut.as_host(doubled)  # synchronizes the current stream
    assert h.data_ptr() == doubled.data_ptr()
    assert h.tolist() == [float(2 * i) for i in range(n)]
    h[0] = -5.0  # CPU writes, GPU reads
    assert doubled[0].item() == -5.0
    del x
    gc.collect()  # y keeps x's memory alive
    assert y[n - 1].item() == float(n)


def test_as_device_refuses_torch_cpu_memory_when_not_accessible():
    t = torch.zeros(16)
    access = ut.gpu_access(t)
    if access["accessible"]:
        pytest.skip("host memory is GPU-accessible here (HMM/ATS or XNACK)")
    with pytest.raises(ut.UmemTorchError, match="cannot access"):
        ut.as_device(t)


def test_two_streams_never_see_each_others_pending_blocks():
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 1 << 18
    results = []
    held = 0
    for i in range(100):
        with torch.cuda.stream(s1):
            a = torch.full((n,), float(i), device="cuda")
            torch.cuda._sleep(2_000_000)  # keep s1 busy so a's block is still in use when freed
            results.append((i, a + 0))
        del a  # freed on s1 while s1 still has to read it
        held = max(held, ut.memory_stats(0)["umem.held_for_streams_bytes"])
        with torch.cuda.stream(s2):
            c = torch.empty(n, device="cuda")
            c.fill_(-1.0)  # would corrupt results if c took a's block too early
        del c
    torch.cuda.synchronize()
    for i, b in results:
        assert torch.all(b == float(i)).item(), f"iteration {i} read a reused block"
    assert held > 0  # blocks did wait for their stream


def test_statistics_empty_cache_and_oom():
    torch.cuda.reset_peak_memory_stats(0)
    base = torch.cuda.memory_allocated(0)
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_allocated(0) >= base + (64 << 20)
    assert torch.cuda.max_memory_allocated(0) >= base + (64 << 20)
    del x
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated(0) == base
    assert torch.cuda.max_memory_allocated(0) >= base + (64 << 20)
    reserved = torch.cuda.memory_reserved(0)
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved(0) < reserved
    free, total = torch.cuda.mem_get_info(0)
    node = node0()
    with open(f"/sys/devices/system/node/node{node}/meminfo") as f:
        memtotal_kb = next(int(line.split()[3]) for line in f if "MemTotal" in line)
    assert total == memtotal_kb * 1024 and 0 < free <= total
    torch.cuda.set_per_process_memory_fraction(1e-6, 0)
    try:
        with pytest.raises(torch.cuda.OutOfMemoryError, match="umem"):
            torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    finally:
        torch.cuda.set_per_process_memory_fraction(0.0, 0)
    assert ut.memory_stats(0)["num_ooms"] >= 1
    y = torch.ones(10, device="cuda")  # the process is fine after the OOM
    assert y.sum().item() == 10.0


def test_bind_local_rank_under_torchrun_with_nccl():
    """Every visible GPU gets one rank; each binds, enables umem and all-reduces umem memory."""
    n = torch.cuda.device_count()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           os.path.join(HERE, "torchrun_child.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    results = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(results) == n, r.stdout
    assert all("allreduce=ok" in l and "source=LOCAL_RANK" in l for l in results), results
    assert sorted(int(l.split("device=")[1].split()[0]) for l in results) == list(range(n))
