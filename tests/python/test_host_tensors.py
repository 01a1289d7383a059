"""CPU tensors in umem memory (umem.torch.empty)."""
import gc
import os
import subprocess
import sys

import pytest
import torch

import umem.torch as ut



def test_empty_on_node0_holds_values_and_lives_there():
    before = ut.memory_stats(-1)["allocation.all.current"]
    x = ut.empty(256, 1024, dtype=torch.float32, node=0)  # 1 MiB
    assert x.shape == (256, 1024) and x.dtype == torch.float32 and x.device.type == "cpu"
    x.copy_(torch.arange(x.numel(), dtype=torch.float32).view(256, 1024))
    assert x[255, 1023].item() == 256 * 1024 - 1
    assert x.sum().item() == pytest.approx((256 * 1024 - 1) * 256 * 1024 / 2)
    r = ut.residency(x)
    assert set(r["pages"]["per_node"]) == {"0"}  # every touched page on node 0
    assert r["pages"]["per_node"]["0"] == r["pages"]["total"]
    assert ut.memory_stats(-1)["allocation.all.current"] == before + 1
    del x
    gc.collect()
    assert ut.memory_stats(-1)["allocation.all.current"] == before


def test_views_keep_the_memory_alive():
    before = ut.memory_stats(-1)["allocation.all.current"]
    x = ut.empty(64, dtype=torch.int64, node=0)
    x.fill_(7)
    tail = x[32:]
    del x
    gc.collect()
    assert ut.memory_stats(-1)["allocation.all.current"] == before + 1
    assert tail.sum().item() == 7 * 32
    del tail
    gc.collect()
    assert ut.memory_stats(-1)["allocation.all.current"] == before


def test_unknown_node_is_refused_with_the_nodes_that_exist():
    with pytest.raises(umem_error()) as e:
        ut.empty(16, node=63)
    assert "63" in str(e.value)


def umem_error():
    import umem
    return umem.UmemError


def test_memory_is_freed_silently_after_the_module_globals_are_gone(monkeypatch):
    # At interpreter exit the last tensor may die after umem.torch's globals were cleared.
    before = ut.memory_stats(-1)["allocation.all.current"]
    x = ut.empty(64, node=0)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with monkeypatch.context() as m:
        m.setattr(ut.host_tensors, "_lib", None)
        del x
        gc.collect()
    assert unraisable == []
    assert ut.memory_stats(-1)["allocation.all.current"] == before


def test_interpreter_exit_prints_nothing(package_dir):
    code = ("import umem.torch as ut\n"
            "kept = [ut.empty(16, node=0) for _ in range(4)]\n"
            "cycle = {'tensor': ut.empty(8, node=0)}\n"
            "cycle['self'] = cycle\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=package_dir))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_an_alias_keeps_the_memory_when_its_source_is_rebound():
    # `param.data = as_device(param)` rebinds the source; the alias must still own the memory.
    before = ut.memory_stats(-1)["allocation.all.current"]
    x = ut.empty(1024, dtype=torch.float32, node=0).detach()  # not a view: x alone holds it
    x.fill_(3.0)
    alias = ut.host_tensors._alias_like(x, torch.device("cpu"))
    x.data = torch.zeros(1)
    del x
    gc.collect()
    assert ut.memory_stats(-1)["allocation.all.current"] == before + 1
    assert alias.sum().item() == 3.0 * 1024
    del alias
    gc.collect()
    assert ut.memory_stats(-1)["allocation.all.current"] == before
