"""PyTorch on umem memory: the CUDA/HIP allocator, statistics, zero-copy aliases, CPU tensors on
chosen NUMA nodes, model weights and per-rank binding. docs/torch-bridge.md gives the semantics
(ownership, alias validity, synchronization) precisely; read it before using the aliases.

One module per feature; this one only re-exports their public names:
    enabling        enable(), enabled(), mode(): umem as PyTorch's GPU allocator; enable_host(),
                    host_enabled(): its CPU allocator; pinned_enabled(): its pinned-memory one
    statistics      memory_stats() and the other torch.cuda memory functions
    host_tensors    empty(), residency(), gpu_access(), as_device(), as_host()
    zero_copy_mode  zero_copy(), ZeroCopyLog (named apart from the zero_copy it exports, which
                    would otherwise hide the module)
    weights         load_safetensors(), load_into(), meta_parameters()
    rank_binding    bind_local_rank()
    deferred_releases  (internal) aliases' registrations released off the caller's thread
"""
from ._common import UmemTorchError
from .enabling import Mode, enable, enable_host, enabled, host_enabled, mode, pinned_enabled
from .host_tensors import as_device, as_host, empty, gpu_access, residency
from .rank_binding import RANK_VARIABLES, SIZE_VARIABLES, bind_local_rank
from .statistics import (empty_cache, mem_get_info, memory_stats, memory_summary,
                         reset_peak_memory_stats, set_memory_fraction)
from .weights import load_into, load_safetensors, meta_parameters
from .zero_copy_mode import ZeroCopyLog, zero_copy

__all__ = ["enable", "enabled", "mode", "enable_host", "host_enabled", "pinned_enabled",
           "memory_stats",
           "memory_summary", "empty_cache", "mem_get_info", "set_memory_fraction", "reset_peak_memory_stats", "empty", "residency",
           "gpu_access", "as_device", "as_host", "zero_copy", "ZeroCopyLog", "load_safetensors",
           "load_into", "meta_parameters", "bind_local_rank", "RANK_VARIABLES", "SIZE_VARIABLES",
           "Mode", "UmemTorchError"]
