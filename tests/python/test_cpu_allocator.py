"""umem as PyTorch's CPU allocator (umem.torch.enable_host(), Note [CPU allocator] in
torch_bridge/extension/umem_cpu_allocator.cpp), on the CPU with the installed PyTorch. The swap
cannot be undone in a process, so each test runs its scenario in a fresh Python process
(cpu_allocator_child.py) and checks the JSON it prints."""
import json
import os
import subprocess
import sys

import pytest
import torch

import umem.torch as ut
import umem.torch.zero_copy_mode as zc

HERE = os.path.dirname(os.path.abspath(__file__))


def run_child(package_dir, scenario, *args, env=None):
    run = subprocess.run([sys.executable, os.path.join(HERE, "cpu_allocator_child.py"),
                          package_dir, scenario, *args], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, **(env or {})))
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_cpu_tensor_made_after_enable_host_is_umem_memory(package_dir):
    r = run_child(package_dir, "tensors")
    assert r["in_force_before"] is False and r["host_enabled"] is True
    assert r["before_is_umem"] is False  # made before the switch: PyTorch's memory
    # Factories, operators, clones, torch.load and a DataLoader batch (no workers).
    assert r["umem"] == {name: True for name in r["umem"]}, r["umem"]
    assert len(r["umem"]) >= 7
    assert r["misaligned"] == []  # PyTorch needs 64 bytes (c10::gAlignment)
    assert r["values_ok"] is True
    assert r["empty_numel0_ptr"] == 0


def test_cpu_statistics_count_cpu_tensors_alone(package_dir):
    r = run_child(package_dir, "statistics")
    # 10 tensors of 1 MiB each: allocations and bytes appear under "cpu" and go when freed.
    assert r["allocations_during"] - r["allocations_before"] == 10
    assert r["bytes_during"] - r["bytes_before"] >= 10 << 20
    assert r["allocations_after"] == r["allocations_before"]
    assert r["peak_after"] >= r["bytes_during"]
    assert r["reserved_during"] >= r["bytes_during"]
    assert r["cpu_keys_match_all"] is True  # no GPU here: the host is everything


def test_enable_host_is_idempotent_and_refuses_late_options(package_dir):
    r = run_child(package_dir, "twice")
    assert r["second_call"] == "ok"
    assert "cannot change any more" in r["late_options"]


def test_options_made_before_the_bridge_reach_cpu_tensors(package_dir):
    r = run_child(package_dir, "out_of_memory")
    # limit.total caps umem's memory: a CPU tensor past it is PyTorch's out-of-memory error.
    assert r["error_type"] in ("OutOfMemoryError",), r
    assert "umem CPU allocator" in r["message"], r["message"]
    assert r["small_after_ok"] is True


def test_large_cpu_tensors_under_an_address_space_limit(package_dir):
    # RLIMIT_AS counts reservations: umem's shrink to fit it (host_numa_source.cpp).
    r = run_child(package_dir, "address_space_limit")
    assert r["numel_ones"] == [16 << 20, 64 << 20, 200 << 20]
    assert r["umem"] == [True, True, True]


def test_the_profiler_sees_cpu_tensors_made_by_umem(package_dir):
    r = run_child(package_dir, "profiler")
    assert r["empty_memory"] >= 1 << 20  # torch.ones' aten::empty, reported as PyTorch's own is


def test_dataloader_fork_workers_allocate_with_umem_and_exit(package_dir):
    r = run_child(package_dir, "workers")
    assert r["batch_sums"] == sorted(float(64 * sum(range(4 * b, 4 * b + 4))) for b in range(8))
    assert r["worker_tensors_umem"] is True  # what a worker made came from umem
    assert r["batches_umem_in_main"] is False  # batches come back in shared memory (not umem's)


class AccessibleGpu:
    """Stands in for zc._target: a GPU that can use memory in place only where `accessible`."""

    def __init__(self, accessible):
        self.accessible = accessible

    def gpu_available(self):
        return True

    def gpu_access(self, t):
        return {"accessible": self.accessible, "umem": self.accessible, "reason": "stand-in"}


def test_pin_memory_in_zero_copy_is_the_tensor_itself_where_the_gpu_can_use_it(monkeypatch):
    monkeypatch.setattr(zc, "_target", AccessibleGpu(True))
    t = torch.arange(8.0)
    with ut.zero_copy() as log:
        pinned = t.pin_memory()
    assert pinned is t
    assert log.events == [("pin_memory", "alias", "GPU-usable in place: the tensor itself")]


def test_pin_memory_in_zero_copy_copies_other_memory_saying_why(monkeypatch):
    monkeypatch.setattr(zc, "_target", AccessibleGpu(False))
    t = torch.arange(8.0)
    with ut.zero_copy() as log:
        try:
            t.pin_memory()  # PyTorch's own: a CPU-only build has no pinned memory to give
        except RuntimeError:
            pass
    assert log.events == [("pin_memory", "copy", "the GPU cannot access it: stand-in")]
    with pytest.raises(ut.UmemTorchError, match="pin_memory would copy"):
        with ut.zero_copy(strict=True):
            t.pin_memory()
