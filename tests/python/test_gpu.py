"""On a real GPU with PyTorch >= 2.0 (run on the lent H200 by run-gpu-tests-on-h200.sh). umem is
enabled once for this process (conftest.py's umem_gpu), before anything else touches the GPU, so
run these in their own pytest process: `pytest -m gpu`. Nothing of PyTorch is patched: every
figure below comes through PyTorch's own functions from umem's allocator extension."""
import gc
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

import umem.torch as ut

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("umem_gpu")]
HERE = os.path.dirname(os.path.abspath(__file__))


def node0():
    return ut.memory_stats(0)["umem.numa_node"]


def discrete():
    """Whether GPU 0 tensors are the GPU's own memory (not host memory the CPU could read)."""
    probe = torch.empty(16, device="cuda")
    return not ut.gpu_access(probe)["host_accessible"]


def test_enable_installs_the_extension_and_pytorch_counts_umem_blocks():
    assert ut.mode() == "extension"
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["active_bytes.all.current"]
    allocated = torch.accelerator.memory_allocated()
    x = torch.ones(256, device="cuda")  # 1 KiB
    assert ut.gpu_access(x)["umem"] is True
    assert torch.cuda.memory_stats()["active_bytes.all.current"] == before + 1024
    assert torch.accelerator.memory_allocated() == allocated + 1024
    assert torch.accelerator.memory_stats()["allocation.all.current"] >= 1
    assert x.sum().item() == 256.0
    if not discrete():
        assert set(ut.residency(x)["pages"]["per_node"]) == {str(node0())}


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
    y.mul_(2)  # GPU writes, CPU reads after synchronizing
    h = ut.as_host(y)  # y is host memory on the GPU: the CPU may alias it back
    assert h.data_ptr() == x.data_ptr()
    assert h.tolist() == [float(2 * i) for i in range(n)]
    h[0] = -5.0  # CPU writes, GPU reads
    assert y[0].item() == -5.0
    del x, h
    gc.collect()  # y keeps the memory alive
    assert y[n - 1].item() == float(2 * (n - 1))
    if discrete():
        with pytest.raises(ut.UmemTorchError, match="CPU cannot use"):
            ut.as_host(torch.ones(8, device="cuda"))


def test_host_tensor_larger_than_a_segment_takes_a_copy_from_pageable_memory():
    # A block spanning two registrations of host memory once failed every copy into it.
    sizes = [96 << 20, 200 << 20]
    tensors = [ut.as_device(ut.empty(s, dtype=torch.uint8, node=node0())) for s in sizes]
    for t in tensors:
        t.copy_(torch.full((t.numel(),), 7, dtype=torch.uint8))
        assert t.sum(dtype=torch.int64).item() == 7 * t.numel()


def test_two_streams_never_see_each_others_pending_blocks():
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    n = 1 << 18
    results = []
    for i in range(100):
        with torch.cuda.stream(s1):
            a = torch.full((n,), float(i), device="cuda")
            torch.cuda._sleep(2_000_000)  # keep s1 busy so a's block is still in use when freed
            results.append((i, a + 0))
        del a  # freed on s1 while s1 still has to read it
        with torch.cuda.stream(s2):
            c = torch.empty(n, device="cuda")
            c.fill_(-1.0)  # would corrupt results if c took a's block too early
        del c
    torch.cuda.synchronize()
    for i, b in results:
        assert torch.all(b == float(i)).item(), f"iteration {i} read a reused block"


def test_record_stream_keeps_a_block_until_the_other_stream_is_done():
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        t = torch.empty(1 << 20, device="cuda")
    ptr = t.data_ptr()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda._sleep(50_000_000)  # the current stream is busy using t
    t.record_stream(torch.cuda.current_stream())
    del t
    with torch.cuda.stream(side):
        again = torch.empty(1 << 20, device="cuda")
    assert again.data_ptr() != ptr, "handed out while another stream still used it"
    torch.cuda.synchronize()  # `again` stays alive: t's block is the only free one, as in PyTorch's test
    with torch.cuda.stream(side):
        later = torch.empty(1 << 20, device="cuda")
    assert later.data_ptr() == ptr, "not reused once every stream was done"


def test_statistics_empty_cache_and_oom_through_pytorch():
    torch.cuda.reset_peak_memory_stats(0)
    base = torch.cuda.memory_allocated(0)
    x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    assert torch.cuda.memory_allocated(0) == base + (64 << 20)
    assert torch.cuda.max_memory_allocated(0) >= base + (64 << 20)
    del x
    assert torch.cuda.memory_allocated(0) == base
    reserved = torch.cuda.memory_reserved(0)
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved(0) < reserved
    free, total = torch.accelerator.get_memory_info(0)
    assert (free, total) == ut.mem_get_info(0) or 0 < free <= total
    torch.cuda.set_per_process_memory_fraction(1e-6, 0)
    try:
        with pytest.raises(torch.cuda.OutOfMemoryError,
                           match=r"Tried to allocate 1024\.00 MiB\. GPU 0 has a total capacity of "
                                 r"[0-9.]+ [GMK]iB of which .* allowed; .*umem: "):
            torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, 0)
    assert torch.cuda.memory_stats()["num_ooms"] >= 1
    y = torch.ones(10, device="cuda")  # the process is fine after the OOM
    assert y.sum().item() == 10.0


def test_memory_snapshot_shows_umem_segments_in_the_default_pool():
    x = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
    segments = [s for s in torch.cuda.memory_snapshot() if s["segment_pool_id"] == (0, 0)]
    blocks = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
    assert any(s["address"] <= x.data_ptr() < s["address"] + s["total_size"] for s in segments)
    assert any(b["requested_size"] == 3 << 20 and b["size"] >= 3 << 20 for b in blocks)
    del x


def test_memory_history_records_umem_blocks_with_their_stacks():
    torch.cuda.memory._record_memory_history(max_entries=1000)
    try:
        x = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
        freed = x.data_ptr()
        del x
        y = torch.empty(7 << 20, dtype=torch.uint8, device="cuda")
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0]
    actions = [(e["action"], e["addr"]) for e in trace]
    assert ("alloc", freed) in actions and ("free_requested", freed) in actions
    alloc = next(e for e in trace if e["action"] == "alloc" and e["addr"] == freed)
    assert alloc["size"] == 5 << 20
    assert any(f["filename"].endswith("test_gpu.py") for f in alloc["frames"]), alloc["frames"]
    live = [b for s in snap["segments"] for b in s["blocks"] if b["address"] == y.data_ptr()]
    assert len(live) == 1 and live[0]["state"] == "active_allocated"
    assert any(f["filename"].endswith("test_gpu.py") for f in live[0]["frames"])
    del y


def test_cuda_graph_capture_replay_with_an_allocation_from_another_thread():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).cuda()
    static_in = torch.randn(8, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm up, as PyTorch's docs ask
            model(static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    other = []

    def allocate_elsewhere():  # umem memory on another stream while the capture runs
        with torch.cuda.stream(torch.cuda.Stream()):
            p = torch.cuda.caching_allocator_alloc(1 << 20)
            other.append(p)
            torch.cuda.caching_allocator_delete(p)
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        static_out = model(static_in)
        thread = threading.Thread(target=allocate_elsewhere)
        thread.start()
        thread.join()
    assert len(other) == 1 and other[0]
    for _ in range(3):
        static_in.copy_(torch.randn(8, 64, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.allclose(static_out, model(static_in))
    pool = [s for s in torch.cuda.memory_snapshot() if s["segment_pool_id"] == g.pool()]
    assert pool, "the capture's tensors live in the graph's private pool"


def test_make_graphed_callables_trains():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    model.cuda()
    x = torch.randn(16, 32, device="cuda")
    graphed = torch.cuda.make_graphed_callables(model, (x,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(10):
        opt.zero_grad(set_to_none=True)
        loss = graphed(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


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
