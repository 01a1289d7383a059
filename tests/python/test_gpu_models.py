"""Real models with umem in its default configuration beside PyTorch's own allocator, each in a
process of its own (bench/torch_alloc/workloads.py, which the training benchmark runs too): same seeds, deterministic algorithms, so the losses must
be equal. Needs transformers and torchvision (the GPU machine has both)."""
import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))


def workload(name, allocator, compile_mode=None, steps=20):
    cmd = [sys.executable, os.path.join(HERE, "..", "..", "bench", "torch_alloc", "workloads.py"), name, "--allocator", allocator,
           "--steps", str(steps)]
    if compile_mode:
        cmd += ["--compile", compile_mode]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-6000:]}"
    result = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(result))  # the test log keeps the figures
    return result


def needs(module):
    pytest.importorskip(module, reason=f"{module} is not installed here")


@pytest.mark.parametrize("name", ["gpt2", "llama", "resnet50"])
def test_trains_like_pytorchs_allocator(name):
    needs("torchvision" if name == "resnet50" else "transformers")
    ours = workload(name, "umem")
    theirs = workload(name, "torch")
    assert ours["umem_mode"] == "extension"
    assert ours["umem_params_on_umem"] == ours["params"]  # every parameter is umem memory
    assert ours["losses"][-1] < ours["losses"][0]  # it learns
    assert ours["losses"] == pytest.approx(theirs["losses"], rel=1e-5)
    assert ours["num_ooms"] == 0


@pytest.mark.parametrize("compile_mode", ["default", "reduce-overhead"])
@pytest.mark.parametrize("name", ["gpt2", "llama", "resnet50"])
def test_trains_under_torch_compile(name, compile_mode):
    needs("torchvision" if name == "resnet50" else "transformers")
    ours = workload(name, "umem", compile_mode, steps=6)
    theirs = workload(name, "torch", compile_mode, steps=6)  # compiled kernels round their way
    assert ours["umem_mode"] == "extension"
    assert ours["losses"][-1] < ours["losses"][0]
    assert ours["losses"] == pytest.approx(theirs["losses"], rel=1e-5)
