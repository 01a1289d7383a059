"""umem as PyTorch's pinned-memory allocator on a real GPU (Note [Pinned memory allocator] in
torch_bridge/extension/pinned_memory_allocator.hpp), and CPU tensors in umem memory kept until the
non_blocking copies from them are done (Note [Host blocks in flight] in bridge.hpp). Each test runs
umem.torch.enable(host=True) in a fresh process (pinned_memory_child.py)."""
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
REGISTRY = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 8)


def run_child(package_dir, *args):
    run = subprocess.run([sys.executable, os.path.join(HERE, "pinned_memory_child.py"),
                          package_dir, *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_pinned_memory_is_umem_memory_where_pytorch_has_a_host_allocator_registry(package_dir):
    r = run_child(package_dir, "pinned")
    assert r["pinned_enabled"] is REGISTRY, r
    # umem's CPU tensors are registered memory: pinned, and pin_memory() of one is itself.
    assert r["cpu_pin_is_itself"] is True
    assert r["batch_is_umem"] is True and r["batch_is_pinned"] is True
    assert r["foreign_is_umem"] is False
    assert r["copy_equal"] is True and r["copy_is_pinned"] is True
    assert r["fresh_is_pinned"] is True
    # Fresh pinned memory and the copy pin_memory() makes are umem's from 2.8 on.
    assert r["fresh_is_umem"] is REGISTRY and r["copy_is_umem"] is REGISTRY, r


@pytest.mark.skipif(not REGISTRY, reason=f"PyTorch {torch.__version__} has no host-allocator "
                    "registry (2.8 and later): its record_event never reaches umem")
def test_a_cpu_tensor_dropped_during_its_non_blocking_copy_is_not_reused_early(package_dir):
    guarded = run_child(package_dir, "in_flight", "umem")
    assert guarded["pinned_enabled"] is True
    assert guarded["wrong"] == [], guarded
    assert guarded["reused"] == 0, guarded
    # The control: with PyTorch's own host allocator, record_event does not reach umem, the block
    # goes back at once and the GPU copies the overwrite (what the test would miss otherwise).
    exposed = run_child(package_dir, "in_flight", "withheld")
    assert exposed["pinned_enabled"] is False
    assert exposed["reused"] > 0 and exposed["wrong"] != [], exposed


@pytest.mark.skipif(not REGISTRY, reason=f"PyTorch {torch.__version__} has no host-allocator "
                    "registry (2.8 and later): graph captures never reach umem's")
def test_pinned_memory_of_a_graph_capture_stays_the_graph_s_until_the_graph_is_reset(package_dir):
    r = run_child(package_dir, "graph")
    assert r["pinned_enabled"] is True
    # The capture ran (where at::HostAllocator has private pools, PyTorch asks the host allocator
    # at every capture_begin), the block freed inside it stayed allocated, no later pinned tensor
    # got it, and every replay copied the captured values.
    assert r["kept"] == 1 and r["reused"] == 0 and r["wrong"] == 0, r
    assert r["with_graph"] == 1 and r["after_reset"] == 0, r


@pytest.mark.skipif(not REGISTRY, reason=f"PyTorch {torch.__version__} has no host-allocator "
                    "registry (2.8 and later): host_memory_stats() never asks umem")
def test_host_memory_stats_are_umem_s_host_statistics(package_dir):
    r = run_child(package_dir, "host_stats")
    assert r["pinned_enabled"] is True
    assert "allocated_bytes.current" in r["pytorch"], r["keys"]
    # What PyTorch reports is umem's host statistics, read at the same moment.
    assert r["pytorch"] == r["umem"], r
    assert r["pytorch"]["allocated_bytes.current"] >= 40960, r  # the segment holding the block
    assert r["reset"]["allocated_bytes.peak"] == r["reset"]["allocated_bytes.current"], r
