"""Real models trained on the CPU with umem as PyTorch's CPU allocator: torchvision's ResNet-18,
PyTorch's own nn.Transformer (dropout on) and nn.LSTM, three SGD steps with momentum each, two
intra-op threads. Every parameter, gradient and optimizer state is umem memory, and the losses
and weights equal PyTorch's own allocator's bit for bit (each run in a fresh process:
cpu_allocator_models_child.py)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


MODELS = ["resnet18", "transformer", "lstm"]


def train(package_dir, mode, models):
    run = subprocess.run([sys.executable, os.path.join(HERE, "cpu_allocator_models_child.py"),
                          package_dir, mode, *models], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(package_dir):
    models = [m for m in MODELS if m != "resnet18" or importlib.util.find_spec("torchvision")]
    return train(package_dir, "umem", models), train(package_dir, "pytorch", models)


@pytest.mark.parametrize("model", MODELS)
def test_a_model_trains_the_same_in_umem_memory(runs, model):
    umem, pytorch = runs
    if model not in umem:
        pytest.skip("torchvision is not installed")
    umem, pytorch = umem[model], pytorch[model]
    assert umem["losses"] == pytorch["losses"]
    assert umem["checksum"] == pytorch["checksum"]
    assert umem["not_umem"] == 0 and umem["tensors"] == pytorch["tensors"] > 0
    assert umem["allocations"] > 3 * umem["tensors"]  # activations and temporaries too
    assert umem["live_bytes"] >= umem["state_bytes"]
    assert umem["peak_bytes"] > umem["live_bytes"]
