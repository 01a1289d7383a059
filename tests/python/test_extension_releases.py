"""The allocator extension across PyTorch releases, as far as a CPU-only PyTorch can test it: the
key its built module is named after, `python -m umem.torch build`'s answers, enable()'s proof
that the swap is in force, and what a mode says it lacks. (Compiling against other releases'
headers is tests/torch_extension/check-releases.sh; running it is the GPU machine's.)"""
import os
import subprocess
import sys

import pytest
import torch

import umem.torch as ut
from umem import _extension


def test_the_module_name_holds_the_key_and_is_an_identifier(monkeypatch):
    k = {"torch": "2.9.1+rocm7.2.1", "runtime": "rocm7.2.1", "source": "0123abcd"}
    name = _extension.module_name(k)
    assert name.isidentifier()
    assert "0123abcd" in name and "2_9_1" in name and "rocm7_2_1" in name
    other = _extension.module_name(dict(k, torch="2.10.0+rocm7.2.1"))
    assert other != name  # another PyTorch never loads this build


def test_a_cpu_only_pytorch_has_no_key_and_says_why():
    if torch.version.cuda or getattr(torch.version, "hip", None):
        pytest.skip(f"PyTorch {torch.__version__} is a GPU build")
    with pytest.raises(RuntimeError, match="CPU-only build"):
        _extension.key()


def run_module(package_dir, *args):
    return subprocess.run([sys.executable, "-m", "umem.torch", *args], capture_output=True,
                          text=True, timeout=300, cwd=package_dir,
                          env=dict(os.environ, PYTHONPATH=package_dir))


def test_build_command_answers_in_one_line(package_dir):
    usage = run_module(package_dir, "bogus")
    assert usage.returncode == 2
    assert usage.stderr.strip() == "usage: python -m umem.torch build [--verbose] [cuda|cpu]"
    assert run_module(package_dir, "build", "gpu").returncode == 2
    if torch.version.cuda or getattr(torch.version, "hip", None):
        pytest.skip("a GPU build of PyTorch would build the GPU extension")
    built = run_module(package_dir, "build", "cuda")
    assert built.returncode == 1
    assert built.stderr.strip().splitlines()[-1].startswith(
        "umem: the cuda allocator extension cannot be built here: PyTorch ")


def test_build_command_builds_the_cpu_extension_on_a_cpu_only_pytorch(package_dir):
    built = run_module(package_dir, "build")  # both kinds where PyTorch has a GPU, else "cpu"
    assert built.returncode == 0, built.stderr
    lines = built.stdout.strip().splitlines()
    assert lines[-2].startswith("umem cpu allocator extension: ") and lines[-2].endswith(".so")
    assert os.path.isfile(lines[-2].split(": ", 1)[1])
    assert lines[-1].startswith(f"key: PyTorch {torch.__version__}, cpu, source ")


class _Extension:
    def __init__(self, in_force):
        self._in_force = in_force

    def in_force(self):
        return self._in_force


def test_a_swap_not_in_force_is_an_error_saying_what_to_do(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "7.2.1", raising=False)
    with pytest.raises(ut.UmemTorchError) as e:
        ut.enabling._prove_in_force(_Extension(False), None)
    message = str(e.value)
    assert "still come from another one" in message
    assert "ROCm up to 2.10" in message
    assert "right after `import torch`" in message
    ut.enabling._prove_in_force(_Extension(True), None)  # in force: no error


def test_a_mode_is_its_name_and_lists_what_it_lacks():
    m = ut.Mode("extension", ("MemPool(no_split=True)",))
    assert m == "extension" and isinstance(m, str)
    assert m.lacks == ("MemPool(no_split=True)",)
    assert ut.Mode("extension").lacks == ()
