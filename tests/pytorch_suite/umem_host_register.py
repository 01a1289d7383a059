"""pytest plugin (-p umem_host_register): makes umem PyTorch's CPU allocator
(umem.torch.enable_host()) before any test runs, and proves that it serves a new CPU tensor.
UMEM_HOST=0 leaves PyTorch's own allocator (the baseline run)."""
import os
import sys


def pytest_configure(config):
    if os.environ.get("UMEM_HOST", "1") != "1":
        return
    import torch
    try:
        import umem.torch as ut
        from umem import _lib
    except ImportError as e:
        raise SystemExit(f"umem_host_register: cannot import umem ({e}); put the repository's "
                         "python/ folder on PYTHONPATH") from e
    ut.enable_host()
    probe = torch.empty(4096, dtype=torch.uint8)
    if not _lib.lib().umem_torch_owns(probe.data_ptr()):
        raise SystemExit("umem_host_register: umem.torch.enable_host() returned, but a new CPU "
                         "tensor is not umem memory")
    print("umem_host_register: umem is PyTorch's CPU allocator", file=sys.stderr)
