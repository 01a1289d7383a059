"""pytest setup for umem's Python package. Environment (set by the ctest entry):
  UMEM_TORCH_LIBRARY  libumem_torch.so to test (default: build/torch/python/umem/libumem_torch.so)
  UMEM_UMTOPO         the umtopo binary, to build snapshots from captures (default: build/torch)
  UMEM_FIXTURES_DIR   real machine captures (default: ../shared/fixtures/machines)
  UMEM_TEST_INSTALLED 1: test the `umem` package installed in this Python (`pip install .`) as it
                      is, without the source tree's package or UMEM_TORCH_LIBRARY; umtopo is then
                      the one on PATH
GPU tests carry the `gpu` marker and skip, saying why, where torch sees no GPU."""
import os
import shutil
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INSTALLED = os.environ.get("UMEM_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, os.path.join(ROOT, "python"))
    os.environ.setdefault("UMEM_TORCH_LIBRARY",
                          os.path.join(ROOT, "build", "torch", "python", "umem",
                                       "libumem_torch.so"))


@pytest.fixture(scope="session")
def package_dir():
    """The folder holding the `umem` package under test (for child processes' sys.path)."""
    import umem
    return os.path.dirname(os.path.dirname(os.path.abspath(umem.__file__)))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a GPU that PyTorch can use (skipped otherwise)")
    config.addinivalue_line("markers", "hardware: the hardware tier on a ROCm GPU, run by the ctest "
                                       "entry hardware.python.rocm (python.pytest deselects it)")


def pytest_collection_modifyitems(config, items):
    import torch
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=f"no GPU: torch {torch.__version__} reports "
                                   "torch.cuda.is_available() == False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def umem_gpu():
    """umem as PyTorch's GPU allocator for this process (enabled once, before anything else
    touches the GPU, so run GPU tests in their own pytest process: `pytest -m gpu`); skips where
    the GPU cannot use umem memory in place. Yields umem's NUMA node of GPU 0."""
    import torch
    import umem.torch as ut
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    ut.enable()
    node = ut.memory_stats(0).get("umem.numa_node", 0)
    access = ut.gpu_access(ut.empty(16, node=node))
    if not access["accessible"]:
        pytest.skip("umem memory is not GPU-accessible on this machine, so PyTorch's kernels "
                    "cannot use it: " + access["reason"])
    return node


@pytest.fixture
def fixture_file():
    """Path of a capture in the fixtures directory; skips naming the file when it is absent."""
    base = os.environ.get("UMEM_FIXTURES_DIR",
                          os.path.join(ROOT, "..", "shared", "fixtures", "machines"))

    def find(name):
        path = os.path.join(base, name)
        if not os.path.exists(path):
            pytest.skip(f"fixture {name} not found in {base} (set UMEM_FIXTURES_DIR)")
        return path
    return find


@pytest.fixture
def umtopo():
    default = (shutil.which("umtopo") or "umtopo") if INSTALLED else \
        os.path.join(ROOT, "build", "torch", "tools", "umtopo", "umtopo")
    path = os.environ.get("UMEM_UMTOPO", default)
    if not os.path.exists(path):
        pytest.skip(f"umtopo not found at {path} (set UMEM_UMTOPO)")
    return path
