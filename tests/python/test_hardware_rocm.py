"""The `hardware` tier for PyTorch on ROCm, for an MI300A owner (`ctest -L hardware`): PyTorch's own
calls on memory umem serves, on the real HIP runtime. `import torch` of a ROCm build maps
libamdhip64, so umem registers every GPU-visible segment with HIP (hipHostRegister) and HIP's
fills, copies and pointer queries, hipBLAS and RCCL accept umem's memory (Note [GPU visibility
under HIP] in allocator/include/umem/allocator/gpu/hip_gpu_mapper.hpp); given back (empty_cache),
a segment is unregistered first.

Each scenario runs in a fresh process, since umem must be PyTorch's allocator before anything
touches the GPU: this file is that process's script too (`python test_hardware_rocm.py SCENARIO
PACKAGE_ROOT`), which prints one `RESULT {json}` line that the test checks.

Run by its own ctest entry, hardware.python.rocm; python.pytest deselects the `hardware` marker.
Every test skips, saying "hardware tier: ...", unless torch.version.hip is set and
torch.cuda.is_available(); ctest reports the entry Skipped only then. The all-reduce alone skips,
saying why, without NCCL (RCCL) in torch.distributed or with fewer than two GPUs."""
import ctypes
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.hardware
HERE = os.path.abspath(__file__)
SCENARIO_TIMEOUT = 900  # seconds; the first enable() may build umem's allocator extension


@pytest.fixture(autouse=True)
def rocm_gpu():
    if not getattr(torch.version, "hip", None):
        pytest.skip(f"hardware tier: not a ROCm PyTorch: torch {torch.__version__} has no "
                    "torch.version.hip")
    if not torch.cuda.is_available():
        pytest.skip(f"hardware tier: PyTorch sees no GPU: torch {torch.__version__} (HIP "
                    f"{torch.version.hip}) reports torch.cuda.is_available() == False")


def results_of(cmd, expected):
    """Runs `cmd` and returns its `expected` RESULT dictionaries, failing with its output else."""
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=SCENARIO_TIMEOUT)
    results = [json.loads(line[len("RESULT "):]) for line in run.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert run.returncode == 0 and len(results) == expected, \
        f"exit {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    return results


def scenario(name, package_dir):
    return results_of([sys.executable, HERE, name, package_dir], 1)[0]


def test_a_pytorch_step_on_umem_memory_matches_the_cpu(package_dir):
    r = scenario("pytorch_step", package_dir)
    # Given back by empty_cache, a segment is no longer known to HIP (umem unregisters it first).
    assert r["freed_registered_before"], r
    assert r["freed_unknown_after_empty_cache"], r
    assert r["x_umem"] and r["x_registered"], r
    assert r["clone_equal"], r  # hipMemcpyAsync device to device, then device to host
    assert r["zeroed"], r  # zero_, a fill kernel
    assert r["memset_status"] == "hipSuccess" and r["memset_zeroed"], r  # as PyTorch's ops call it
    assert r["h2d_equal"], r  # hipMemcpyAsync from pageable host memory
    assert r["matmul_error"] <= 1e-3 * r["matmul_scale"], r  # hipBLAS on umem memory


def test_umem_host_tensors_aliased_on_the_gpu_serve_kernels_and_copies(package_dir):
    r = scenario("host_alias", package_dir)
    assert r["host_registered"] and r["alias_same_address"], r
    assert r["sum"] == r["expected_sum"], r  # a reduction kernel reads umem host memory
    assert r["doubled_on_cpu"], r  # a kernel writes it; the CPU reads the result in place
    assert r["copied_on_cpu"], r  # hipMemcpyAsync from a umem device tensor into it
    assert r["zeroed_on_cpu"], r  # zero_ on the alias


def test_numpy_memory_inside_zero_copy_is_registered_for_the_alias_and_serves_kernels(package_dir):
    r = scenario("numpy_alias", package_dir)
    assert r["events"] == [["to", "alias", "cpu -> cuda"]], r
    assert r["alias_same_address"] and r["registered_while_aliased"], r
    assert r["sum"] == r["expected_sum"], r  # a reduction kernel reads numpy's memory
    assert r["doubled_in_numpy"], r  # a kernel writes it; numpy reads the result in place
    assert r["unknown_after"], r  # unregistered with the alias


def test_rccl_all_reduce_across_every_gpu_on_umem_memory(package_dir):
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_nccl_available():
        pytest.skip(f"torch {torch.__version__} has no NCCL (RCCL) backend in torch.distributed")
    n = torch.cuda.device_count()
    if n < 2:
        pytest.skip(f"the all-reduce needs two or more GPUs; PyTorch sees {n}")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           HERE, "allreduce", package_dir]
    results = results_of(cmd, n)
    assert sorted(r["device"] for r in results) == list(range(n)), results
    for r in results:
        assert r["world"] == n and r["device"] == r["binding_device"], r
        assert r["umem"] and r["registered"], r  # RCCL refuses a buffer HIP does not know
        assert r["allreduce_ok"], r


# --- the scenarios, each in a process of its own ---------------------------------------------

class _PointerAttributes(ctypes.Structure):
    """hipPointerAttribute_t (the same layout in ROCm 5, 6 and 7: hip_runtime_api.h)."""
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("device_pointer", ctypes.c_void_p), ("host_pointer", ctypes.c_void_p),
                ("is_managed", ctypes.c_int), ("allocation_flags", ctypes.c_uint)]


def _loaded_hip():
    """The libamdhip64 that `import torch` mapped (ctypes opens the same mapping)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libamdhip64.so"):
                hip = ctypes.CDLL(fields[5])
                hip.hipPointerGetAttributes.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
                hip.hipPointerGetAttributes.restype = ctypes.c_int
                hip.hipGetErrorName.argtypes = [ctypes.c_int]
                hip.hipGetErrorName.restype = ctypes.c_char_p
                hip.hipGetLastError.restype = ctypes.c_int
                hip.hipMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                               ctypes.c_void_p]
                hip.hipMemsetAsync.restype = ctypes.c_int
                return hip
    raise RuntimeError("torch.version.hip is set but no libamdhip64 is mapped in this process")


def _device_pointer(hip, ptr):
    """HIP's device pointer for `ptr`, or None where HIP does not know it: hipSuccess without a
    device pointer (ROCm 6 and later) or hipErrorInvalidValue (ROCm 5)."""
    a = _PointerAttributes()
    status = hip.hipPointerGetAttributes(ctypes.byref(a), ctypes.c_void_p(ptr))
    if status == 1:  # hipErrorInvalidValue (ROCm 5)
        # HIP keeps it as the thread's last error, which PyTorch's next kernel-launch check
        # (hipGetLastError) would report as its own: cleared here.
        hip.hipGetLastError()
        return None
    if status != 0:
        raise RuntimeError("hipPointerGetAttributes failed: "
                           + hip.hipGetErrorName(status).decode())
    return a.device_pointer


def _registered(hip, t):
    """Whether HIP knows t's memory at its own address (zero-copy, as umem registers it)."""
    return _device_pointer(hip, t.data_ptr()) == t.data_ptr()


def _pytorch_step(ut, hip):
    out = {}
    dev = torch.device("cuda", torch.cuda.current_device())
    # First, in a segment of its own: freed, then given back by empty_cache.
    freed = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
    freed.fill_(1)
    ptr = freed.data_ptr()
    out["freed_registered_before"] = _registered(hip, freed)
    del freed
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    out["freed_unknown_after_empty_cache"] = _device_pointer(hip, ptr) is None

    n = 512
    x = torch.randn(n, n, device=dev)
    out["x_umem"] = bool(ut.gpu_access(x)["umem"])
    out["x_registered"] = _registered(hip, x)
    y = x.clone()
    w = x.cpu()
    out["clone_equal"] = torch.equal(y.cpu(), w)
    y.zero_()
    out["zeroed"] = int(torch.count_nonzero(y.cpu())) == 0
    # hipMemsetAsync on PyTorch's stream, as its operators that clear memory call it.
    m = x.clone()
    stream = torch.cuda.current_stream(dev).cuda_stream
    status = hip.hipMemsetAsync(m.data_ptr(), 0, m.numel() * m.element_size(), stream)
    out["memset_status"] = hip.hipGetErrorName(status).decode()
    torch.cuda.synchronize()
    out["memset_zeroed"] = int(torch.count_nonzero(m.cpu())) == 0
    z = x @ x
    torch.cuda.synchronize()
    ref = w @ w
    out["matmul_error"] = float((z.cpu() - ref).abs().max())
    out["matmul_scale"] = float(ref.abs().max())
    h = torch.arange(n * n, dtype=torch.float32).reshape(n, n)
    out["h2d_equal"] = torch.equal(h.to(dev).cpu(), h)
    return out


def _host_alias(ut, hip):
    out = {}
    n = 1 << 20
    node = ut.memory_stats(torch.cuda.current_device()).get("umem.numa_node")
    h = ut.empty(n, dtype=torch.float32, node=node)  # a CPU tensor in umem memory
    h.copy_(torch.arange(n, dtype=torch.float32))
    out["host_registered"] = _registered(hip, h)
    d = ut.as_device(h)
    out["alias_same_address"] = d.data_ptr() == h.data_ptr()
    out["sum"] = float(d.sum(dtype=torch.float64).item())
    out["expected_sum"] = float(n * (n - 1) // 2)
    d.mul_(2)
    torch.cuda.synchronize()
    out["doubled_on_cpu"] = torch.equal(h, 2 * torch.arange(n, dtype=torch.float32))
    d.copy_(torch.ones(n, device=d.device))
    torch.cuda.synchronize()
    out["copied_on_cpu"] = bool((h == 1).all())
    d.zero_()
    torch.cuda.synchronize()
    out["zeroed_on_cpu"] = int(torch.count_nonzero(h)) == 0
    return out


def _numpy_alias(ut, hip):
    """Memory umem did not allocate (numpy's), moved inside zero_copy(): with XNACK off (the
    default) registered with HIP for the alias's life, with XNACK on known to HIP the same way."""
    import gc
    import numpy as np
    from umem.torch import host_tensors
    out = {}
    n = 1 << 22
    array = np.arange(n, dtype=np.float32)
    t = torch.from_numpy(array)
    with ut.zero_copy() as log:
        d = t.to("cuda")
    out["events"] = log.events
    out["alias_same_address"] = d.data_ptr() == t.data_ptr()
    out["registered_while_aliased"] = _device_pointer(hip, t.data_ptr()) is not None
    out["sum"] = float(d.sum(dtype=torch.float64).item())
    out["expected_sum"] = float(n * (n - 1) // 2)
    d.mul_(2)
    torch.cuda.synchronize()
    out["doubled_in_numpy"] = bool((array == 2 * np.arange(n, dtype=np.float32)).all())
    del d
    gc.collect()
    host_tensors._releases.settle()  # released on the releases' thread (Note [Deferred releases])
    out["unknown_after"] = _device_pointer(hip, t.data_ptr()) is None
    return out


def _allreduce(ut, hip):
    import torch.distributed as dist
    binding = ut.bind_local_rank()  # LOCAL_RANK / LOCAL_WORLD_SIZE from torchrun
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    expected = world * (world + 1) / 2
    x = torch.full((1 << 20,), float(rank + 1), device="cuda")
    out = {"rank": rank, "world": world, "device": torch.cuda.current_device(),
           "binding_device": binding["device"], "umem": bool(ut.gpu_access(x)["umem"]),
           "registered": _registered(hip, x)}
    dist.all_reduce(x)
    out["allreduce_ok"] = bool(torch.all(x == expected).item())
    dist.destroy_process_group()
    return out


def _main(name, package_root):
    sys.path.insert(0, package_root)
    import umem.torch as ut
    ut.enable()  # first: PyTorch's allocator cannot change once the GPU is in use
    run = {"pytorch_step": _pytorch_step, "host_alias": _host_alias, "numpy_alias": _numpy_alias,
           "allreduce": _allreduce}[name]
    out = run(ut, _loaded_hip())
    out["mode"] = ut.mode()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
