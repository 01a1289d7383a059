"""PyTorch's memory statistics, cache and capacity functions, answered by umem."""
import ctypes

import torch

from .. import _lib
from ._common import _device_index


# umem_torch.h's UMEM_TORCH_HOST: CPU tensors alone.
_HOST = -2


def _stats_index(device):
    """"cpu" (or torch.device("cpu")) means umem's CPU tensors alone; else _device_index."""
    if isinstance(device, (str, torch.device)) and torch.device(device).type == "cpu":
        return _HOST
    return _device_index(device)


def memory_stats(device=None):
    """PyTorch's memory_stats keys for `device` (default: the current GPU; -1 or no GPU: every
    device and umem CPU tensors together; "cpu": umem's CPU tensors alone, with the reserved
    memory of every host-memory pool), plus umem.* keys (docs/torch-bridge.md)."""
    return _lib.take_json(_lib.lib().umem_torch_memory_stats_json(_stats_index(device)))


def reset_peak_memory_stats(device=None):
    _lib.check(_lib.lib().umem_torch_reset_peak_stats(_stats_index(device)))


def memory_summary(device=None):
    """A human-readable table of memory_stats (like torch.cuda.memory_summary)."""
    d = _device_index(device)
    s = memory_stats(d)
    lines = [f"umem memory summary, {'all devices' if d < 0 else f'device {d}'}"
             + (f" (NUMA node {s['umem.numa_node']})" if "umem.numa_node" in s else ""),
             f"{'metric':<30}{'current':>16}{'peak':>16}{'allocated':>16}{'freed':>16}"]
    for metric in ("allocated_bytes", "active_bytes", "requested_bytes", "reserved_bytes",
                   "allocation"):
        row = [s.get(f"{metric}.all.{f}", "") for f in ("current", "peak", "allocated", "freed")]
        lines.append(f"{metric:<30}" + "".join(f"{v:>16}" for v in row))
    for key in ("num_ooms", "num_alloc_retries", "umem.stream_reuses",
                "umem.held_for_streams_bytes", "umem.limit_bytes"):
        lines.append(f"{key:<30}{s.get(key, ''):>16}")
    return "\n".join(lines)


def empty_cache():
    """Returns umem's cached memory to the OS for real. Synchronizes every GPU first (so blocks
    freed while kernels ran may go too); returns the bytes released."""
    synchronized = 1
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for d in range(torch.cuda.device_count()):
            torch.cuda.synchronize(d)
    released = ctypes.c_size_t(0)
    _lib.check(_lib.lib().umem_torch_empty_cache(synchronized, ctypes.byref(released)))
    return released.value


def mem_get_info(device=None):
    """(free, total) bytes for `device`: its socket's NUMA node as the kernel reports it (plus
    umem's unused cache there), capped by the memory fraction. device None: the current GPU, or
    the host's configured placement without GPUs."""
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    _lib.check(_lib.lib().umem_torch_mem_get_info(_device_index(device), ctypes.byref(free),
                                                  ctypes.byref(total)))
    return free.value, total.value


def set_memory_fraction(fraction, device=None):
    """Caps `device`'s umem allocations at `fraction` (0 to 1) of its capacity, mem_get_info's
    total: the NUMA node's memory on an APU, the GPU's own on a discrete GPU; 1 removes the cap
    (torch.cuda.set_per_process_memory_fraction's meaning). Allocations beyond it raise
    torch.cuda.OutOfMemoryError."""
    _lib.check(_lib.lib().umem_torch_set_memory_fraction(float(fraction), _device_index(device)))
