"""umem as PyTorch's allocators: enable() for the GPU (the allocator extension,
python/umem/_extension.py, or PyTorch's pluggable allocator) and the mode in force; enable_host()
for the CPU (the CPU allocator extension, Note [CPU allocator] in umem_cpu_allocator.cpp)."""
import ctypes
import threading
import warnings

import torch

from .. import _lib
from ._common import UmemTorchError
from .statistics import (empty_cache, mem_get_info, memory_stats, reset_peak_memory_stats,
                         set_memory_fraction)

_enabled = False
_host_enabled = False
_pinned_enabled = False
_mode = None
_enable_lock = threading.Lock()
_lib.hold_across_fork(_enable_lock)

_CONF_KEYS = {"limit_total": "limit.total", "max_cached": "max_cached", "huge_pages": "huge_pages"}


def _conf(conf, options):
    items = [conf] if conf else []
    for key, value in options.items():
        name = _CONF_KEYS.get(key, key)
        for prefix in ("limit_node", "limit_device"):  # limit_node0=..., limit_device1=...
            if name.startswith(prefix):
                name = prefix.replace("_", ".") + name[len(prefix):]
        if isinstance(value, bool):
            value = "true" if value else "false"
        items.append(f"{name}:{value}")
    return ",".join(items) or None


def _has_pluggable_allocator():
    return hasattr(getattr(torch.cuda, "memory", None), "CUDAPluggableAllocator")


_MODES = ("auto", "extension", "pluggable")


def _load_extension(mode):
    """The allocator extension, or None for the pluggable allocator (mode 'auto' warns why)."""
    if mode == "pluggable":
        return None
    from .. import _extension
    try:
        return _extension.load()
    except Exception as e:  # a missing compiler, ninja or source: each says what it lacks
        if mode == "extension":
            raise UmemTorchError(f"umem.torch.enable(mode='extension'): umem's allocator extension "
                                 f"cannot be built or loaded here: {e}") from e
        warnings.warn(f"umem.torch.enable(): umem's allocator extension cannot be built or loaded "
                      f"({e}); using PyTorch's pluggable allocator instead, which lacks "
                      "record_stream, graph pools, memory snapshots and native statistics "
                      "(docs/torch-bridge.md)", RuntimeWarning, stacklevel=3)
        return None


def _create_bridge(conf, options, caller):
    """Creates umem's torch bridge with these options unless it exists; raises when options are
    given and it exists already."""
    lib = _lib.lib()
    text = _conf(conf, options)
    status = lib.umem_torch_init(text.encode() if text else None)
    if status == _lib.UMEM_ERR_ALREADY_INITIALIZED and (conf or options):
        raise UmemTorchError(f"umem.torch.{caller}(): umem's torch bridge was already created by "
                             "an earlier umem call in this process (umem.torch.empty, "
                             f"memory_stats, ...), so its options can no longer change; call "
                             f"{caller}() first")
    if status not in (_lib.UMEM_OK, _lib.UMEM_ERR_ALREADY_INITIALIZED):
        raise _lib.error(status)
    return lib


def _unified():
    """Whether every GPU PyTorch sees uses host memory as its memory (an APU, a unified NVIDIA
    part), as umem's bridge reports it; False without a GPU."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return count > 0 and all(_lib.take_json(_lib.lib().umem_torch_device_json(d))["memory"]
                             == "host" for d in range(count))


def _install_host(caller):
    from .. import _extension
    try:
        extension = _extension.load("cpu")
    except Exception as e:  # a missing compiler, ninja, pybind11 or source: each says what
        raise UmemTorchError(f"umem.torch.{caller}(): umem's CPU allocator extension cannot be "
                             f"built or loaded here: {e}") from e
    if not extension.set_cpu_allocator():
        raise UmemTorchError(
            f"umem.torch.{caller}(): PyTorch did not take umem as its CPU allocator: another "
            "library installed its own at a higher priority (c10::SetCPUAllocator)")


def enable_host(conf=None, **options):
    """Makes umem PyTorch's CPU allocator for this process: every CPU tensor made afterwards
    (torch.randn on the CPU, DataLoader batches, torch.load's results) is umem memory, placed by
    umem's policy (the calling thread's NUMA node by default; bind_local_rank binds it), and
    GPU-visible where a GPU runtime is present, so as_device() and zero_copy() alias it. Tensors
    made before keep PyTorch's memory and deleter. Works with a CPU-only PyTorch and no GPU.
    `conf` and keyword options as for enable(). Idempotent; raises UmemTorchError when the
    extension cannot be built (a compiler and ninja are needed once) or PyTorch refuses it."""
    global _host_enabled
    with _enable_lock:
        if _host_enabled:
            if conf or options:
                raise UmemTorchError("umem.torch.enable_host(): umem is already PyTorch's CPU "
                                     "allocator in this process; its options cannot change any "
                                     "more")
            return
        _create_bridge(conf, options, "enable_host")
        _install_host("enable_host")
        _host_enabled = True


def host_enabled():
    """Whether umem is PyTorch's CPU allocator in this process."""
    return _host_enabled


def pinned_enabled():
    """Whether umem is PyTorch's pinned-memory allocator in this process: enable() makes it so in
    extension mode where PyTorch has a host-allocator registry (2.8 and later; docs/cpu-tensors.md,
    "pin_memory, by PyTorch release")."""
    return _pinned_enabled


def enable(conf=None, *, mode="auto", patch_torch=True, host=None, **options):
    """Makes umem PyTorch's CUDA (HIP on ROCm) allocator for this process. Call it before any GPU
    tensor exists. `conf` uses UMEM_ALLOC_CONF syntax ("policy:device:0,spill:warn"); keyword
    options are the same keys (kind="coarse", spill="warn", limit_total="0.9", limit_node0=...,
    limit_device0=...).

    mode "extension" installs umem's allocator extension, built once against this PyTorch: all of
    PyTorch's allocator interface (record_stream, CUDA graphs and MemPools, torch.cuda and
    torch.accelerator statistics, snapshots, fractions, OutOfMemoryError) answers natively.
    "pluggable" uses torch.cuda.memory.CUDAPluggableAllocator, which lacks those; there,
    patch_torch makes torch.cuda.memory_stats/empty_cache/mem_get_info/
    set_per_process_memory_fraction/reset_peak_memory_stats answer from umem. "auto" (default)
    is the extension where it builds, else the pluggable allocator with a warning saying why.
    host: whether umem becomes PyTorch's CPU allocator too (enable_host()). None (default): where
    device memory is unified (every GPU uses host memory: an APU), so that CPU tensors are
    GPU-usable in place; a CPU allocator extension that cannot be built then only warns. True
    elsewhere makes CPU tensors registered (pinned) memory, False keeps PyTorch's.
    Raises UmemTorchError when PyTorch is older than 2.0, has no GPU, or already allocated GPU
    memory with another allocator."""
    global _enabled, _mode, _host_enabled, _pinned_enabled
    with _enable_lock:
        if _enabled:
            if conf or options:
                raise UmemTorchError("umem.torch.enable(): umem is already PyTorch's allocator in "
                                     "this process; its options cannot change any more")
            return
        if mode not in _MODES:
            raise UmemTorchError(f"umem.torch.enable(): mode {mode!r} is not one of "
                                 + ", ".join(_MODES))
        if not _has_pluggable_allocator():
            raise UmemTorchError(
                f"umem.torch.enable(): PyTorch {torch.__version__} has no "
                "torch.cuda.memory.CUDAPluggableAllocator; PyTorch >= 2.0 is needed to use umem as "
                "the GPU allocator (umem.torch.empty, as_device/as_host and bind_local_rank work "
                "without it)")
        if not torch.cuda.is_available():
            raise UmemTorchError(
                "umem.torch.enable(): no GPU: torch.cuda.is_available() is False (a CPU-only "
                f"PyTorch build {torch.__version__}, no driver, or no visible device); there is no "
                "GPU allocator to replace")
        extension = _load_extension(mode)
        if extension is not None and extension.set_event_provider() not in (
                _lib.UMEM_OK, _lib.UMEM_ERR_ALREADY_INITIALIZED):
            raise _lib.error()
        lib = _create_bridge(conf, options, "enable")
        if extension is not None:
            allocator = torch.cuda.memory._CUDAAllocator(extension.make_allocator())
        else:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(
                _lib.library_path(), "umem_torch_pluggable_malloc", "umem_torch_pluggable_free")
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise UmemTorchError(
                "umem.torch.enable(): PyTorch's GPU allocator is already in use (a GPU tensor was "
                f"created before enable(), or another allocator was installed): {e}. Call "
                "umem.torch.enable() at the start of the program, before anything touches the "
                "GPU") from e
        _prove_in_force(extension, lib)
        if extension is not None and not extension.register_device_allocator():
            warnings.warn("umem.torch.enable(): torch.accelerator's memory functions still reach "
                          "another allocator (c10's allocator registry did not take umem's)",
                          RuntimeWarning, stacklevel=2)
        # Pinned memory from umem, and record_event keeping umem's CPU blocks until non_blocking
        # copies from them are done (Note [Host blocks in flight] in bridge.hpp).
        _pinned_enabled = extension is not None and extension.set_pinned_allocator()
        _enabled = True
        _mode = Mode("extension", tuple(extension.lacking())) if extension is not None \
            else Mode("pluggable", _PLUGGABLE_LACKS)
        if extension is not None and _mode.lacks:  # the pluggable fallback warned already
            warnings.warn(f"umem.torch.enable(): umem is PyTorch's allocator ({_mode}), but with "
                          f"PyTorch {torch.__version__} it cannot provide: "
                          + "; ".join(_mode.lacks), RuntimeWarning, stacklevel=2)
        if extension is None:
            lib.umem_torch_set_oom_exceptions(1)
            if patch_torch:
                _patch_torch_cuda()
        if not _host_enabled and (host or (host is None and _unified())):
            try:
                _install_host("enable")
                _host_enabled = True
            except UmemTorchError as e:
                if host:
                    raise
                warnings.warn(f"{e}; CPU tensors stay PyTorch's (pass host=False to keep them so "
                              "without this warning)", RuntimeWarning, stacklevel=2)


def enabled():
    """Whether umem is PyTorch's GPU allocator in this process."""
    return _enabled


class Mode(str):
    """How umem is PyTorch's allocator ("extension" or "pluggable"), with `lacks`: what PyTorch's
    allocator interface cannot get from umem in that mode and PyTorch release, one line each."""

    def __new__(cls, name, lacks=()):
        m = super().__new__(cls, name)
        m.lacks = tuple(lacks)
        return m


_PLUGGABLE_LACKS = ("record_stream", "CUDA graphs and MemPools on umem's memory",
                    "memory snapshots", "torch.accelerator statistics")


def mode():
    """How umem is PyTorch's allocator: Mode("extension") or Mode("pluggable") (a str, with
    .lacks listing what that mode cannot do with this PyTorch), or None before enable()."""
    return _mode


def _prove_in_force(extension, lib):
    """Raises UmemTorchError unless the allocator PyTorch's GPU tensors come from is umem's now.
    On ROCm up to PyTorch 2.10, HIPCachingAllocatorMasqueradingAsCUDA keeps the allocator it saw
    first, so a swap after anything asked PyTorch for its allocator is silently not in force.
    The extension asks PyTorch's own accessor (no allocation). The pluggable allocator cannot be
    asked, so one byte is allocated on the current device and must be umem's: PyTorch's allocator
    is one object for every device, so one device proves it (touching each device would make a
    context on every GPU in every rank)."""
    if extension is not None:
        in_force = extension.in_force()
    else:
        probe = torch.empty(1, dtype=torch.uint8, device="cuda")
        in_force = lib.umem_torch_owns(ctypes.c_void_p(probe.data_ptr())) != 0
        del probe
    if not in_force:
        rocm = getattr(torch.version, "hip", None)
        raise UmemTorchError(
            "umem.torch.enable(): PyTorch accepted umem as its GPU allocator, but its tensors "
            "still come from another one"
            + (" (PyTorch for ROCm up to 2.10 keeps the allocator it handed out first)"
               if rocm else "")
            + ": something asked PyTorch for its GPU allocator before enable() (a torch.cuda "
            "memory function, torch.cuda.set_device, a library importing with GPU work). Call "
            "umem.torch.enable() right after `import torch`, before anything else touches the GPU")


def _patch_torch_cuda():
    def stats(device=None):
        return memory_stats(device)

    def reset_peak(device=None):
        reset_peak_memory_stats(device)

    def fraction(f, device=None):
        set_memory_fraction(f, device)

    for module in (torch.cuda, torch.cuda.memory):
        module.memory_stats = stats
        module.empty_cache = empty_cache
        module.mem_get_info = mem_get_info
        module.reset_peak_memory_stats = reset_peak
        module.set_per_process_memory_fraction = fraction
