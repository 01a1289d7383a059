"""PyTorch on umem memory: the pluggable CUDA/HIP allocator, statistics, zero-copy aliases,
CPU tensors on chosen NUMA nodes, and per-rank binding. docs/torch-bridge.md gives the semantics
(ownership, alias validity, synchronization) precisely; read it before using the aliases.
"""
import contextlib
import ctypes
import os
import sys
import threading
import warnings

import torch

from . import _lib, _snapshot_text
from ._lib import UmemError

__all__ = ["enable", "enabled", "mode", "memory_stats", "memory_summary", "empty_cache", "mem_get_info",
           "set_memory_fraction", "reset_peak_memory_stats", "empty", "residency", "gpu_access",
           "as_device", "as_host", "zero_copy", "ZeroCopyLog", "bind_local_rank",
           "UmemTorchError"]


class UmemTorchError(RuntimeError):
    """umem.torch cannot do what was asked here; the message says why and what to do."""


_enabled = False
_mode = None
_enable_lock = threading.Lock()

# --- registration -------------------------------------------------------------------------------

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
    from . import _extension
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


def enable(conf=None, *, mode="auto", patch_torch=True, **options):
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
    Raises UmemTorchError when PyTorch is older than 2.0, has no GPU, or already allocated GPU
    memory with another allocator."""
    global _enabled, _mode
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
        lib = _lib.lib()
        extension = _load_extension(mode)
        if extension is not None and extension.set_event_provider() not in (
                _lib.UMEM_OK, _lib.UMEM_ERR_ALREADY_INITIALIZED):
            raise _lib.error()
        status = lib.umem_torch_init(_conf(conf, options))
        if status == _lib.UMEM_ERR_ALREADY_INITIALIZED and (conf or options):
            raise UmemTorchError("umem.torch.enable(): umem's torch bridge was already created by "
                                 "an earlier umem call in this process (umem.torch.empty, "
                                 "memory_stats, ...), so its options can no longer change; call "
                                 "enable() first")
        if status not in (_lib.UMEM_OK, _lib.UMEM_ERR_ALREADY_INITIALIZED):
            raise _lib.error(status)
        if extension is not None:
            allocator = torch.cuda.memory._CUDAAllocator(extension.make_allocator())
        else:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(
                _lib.library_path(), "umem_torch_malloc", "umem_torch_free")
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


# --- statistics, cache, capacity ----------------------------------------------------------------

def _device_index(device, default_all=False):
    """An int device index; -1 means 'all' (statistics) or 'host'."""
    if device is None:
        if default_all or not torch.cuda.is_available():
            return -1
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type == "cpu":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def memory_stats(device=None):
    """PyTorch's memory_stats keys for `device` (default: the current GPU; -1 or no GPU: every
    device and umem CPU tensors together), plus umem.* keys (docs/torch-bridge.md)."""
    d = _device_index(device)
    return _lib.take_json(_lib.lib().umem_torch_memory_stats_json(d))


def reset_peak_memory_stats(device=None):
    _lib.check(_lib.lib().umem_torch_reset_peak_stats(_device_index(device)))


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


# --- CPU tensors in umem memory -----------------------------------------------------------------

def _storage_span(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr(), s.nbytes()


def _itemsize(dtype):
    return torch.empty((), dtype=dtype).element_size()


def empty(*size, dtype=None, node=None, requires_grad=False):
    """An uninitialized CPU tensor in umem memory: on NUMA node `node`, or with the configured
    placement when None. GPU-visible where a GPU runtime is present, so as_device() aliases it.
    The memory returns to umem when the last tensor (or alias) using it is gone."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    dtype = dtype or torch.get_default_dtype()
    numel = 1
    for n in size:
        numel *= int(n)
    nbytes = max(numel * _itemsize(dtype), 1)
    ptr = ctypes.c_void_p()
    _lib.check(_lib.lib().umem_torch_host_malloc(nbytes, -1 if node is None else int(node),
                                                 ctypes.byref(ptr)))
    owner = _HostBlock(ptr.value)
    t = _alias(ptr.value, nbytes, torch.device("cpu"), owner).view(dtype)[:numel].view(size)
    return t.requires_grad_(requires_grad)


class _HostBlock:
    """Owns one umem host allocation; frees it when the last alias drops it. Holds the free
    function itself: at interpreter exit the last alias may die after this module's globals are
    cleared, and a lookup through them would fail (and print) in __del__."""

    def __init__(self, ptr):
        self.ptr = ptr
        self._free = _lib.lib().umem_torch_host_free

    def __del__(self):
        if self.ptr:
            self._free(self.ptr)


# --- model weights (Note [Reading weights] in weights/safetensors_file.hpp) ---------------------

_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                       "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                       "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
                       "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def _torch_dtype(name, file, tensor):
    d = getattr(torch, _SAFETENSORS_DTYPES[name], None)
    if d is None:
        raise UmemTorchError(f"load_safetensors(): tensor '{tensor}' of {file} is {name}, which "
                             f"PyTorch {torch.__version__} has no dtype for")
    return d


# Bytes per staging buffer of a discrete GPU's load (two of them: Note [Reading weights]).
_STAGE_BYTES = 64 << 20
_DIRECT_IO_ALIGNMENT = 4096


def _gpu_target(device):
    """`device` as a torch.device with its index, and where that GPU's tensors live."""
    target = torch.device(device)
    if target.type == "cpu":
        return target, None
    if target.index is None:
        target = torch.device(target.type, torch.cuda.current_device())
    return target, _lib.take_json(_lib.lib().umem_torch_device_json(target.index))


def _read_into_host_block(file, node, threads, direct_io):
    """The data section of `file` in one umem host block on `node`: (layout, uint8 CPU tensor or
    None for an empty section)."""
    f = _lib.take_json(_lib.lib().umem_torch_load_safetensors_json(
        os.fsencode(file), node, int(threads or 0), 1 if direct_io else 0))
    owner = _HostBlock(f["block"])
    data = _alias(f["data"], f["data_bytes"], torch.device("cpu"), owner) if f["data_bytes"] else None
    return f, data  # the alias keeps the block; without one, it goes with `owner`


def _stage_into_device(file, target, node, threads, direct_io):
    """The data section of `file` in one block of discrete GPU `target`'s memory, read chunk by
    chunk into two pinned buffers, each copied asynchronously while the other is read (Note
    [Reading weights]): host memory holds two chunks, never the file. (layout, uint8 tensor on
    `target` or None)."""
    lib = _lib.lib()
    name = os.fsencode(file)
    layout = _lib.take_json(lib.umem_torch_safetensors_layout_json(name))
    begin, n = layout["data_offset"], layout["data_bytes"]
    if n == 0:
        return layout, None
    data = torch.empty(n, dtype=torch.uint8, device=target)
    align = _DIRECT_IO_ALIGNMENT
    first = begin // align * align if direct_io else begin  # O_DIRECT reads aligned offsets
    end = begin + n
    chunk = min(_STAGE_BYTES, -(-(end - first) // align) * align)
    stream = torch.cuda.Stream(target)
    buffers, copied = [], [None, None]
    for _ in range(2):
        # Pinned blocks are page-aligned in practice; asking chunk + align would double the block
        # (PyTorch's host allocator rounds sizes up to powers of two).
        b = torch.empty(chunk, dtype=torch.uint8, pin_memory=True)
        if b.data_ptr() % align:
            b = torch.empty(chunk + align, dtype=torch.uint8, pin_memory=True)
            b = b[(-b.data_ptr()) % align:][:chunk]
        buffers.append(b)
    try:
        for i, at in enumerate(range(first, end, chunk)):
            k = i % 2
            if copied[k] is not None:
                copied[k].synchronize()  # buffer k's last copy is done: it may be refilled
            size = min(chunk, end - at)
            _lib.check(lib.umem_torch_read_file(name, at, size, buffers[k].data_ptr(), node,
                                                int(threads or 0), 1 if direct_io else 0))
            skip = max(0, begin - at)  # the header's tail in the first aligned chunk
            with torch.cuda.stream(stream):
                data[at + skip - begin:at + size - begin].copy_(buffers[k][skip:size],
                                                                non_blocking=True)
                copied[k] = torch.cuda.Event()
                copied[k].record(stream)
    finally:
        # Copies still running must not outlive `data` or the buffers (a failed read frees them).
        stream.synchronize()
    return layout, data


def load_safetensors(path, *, device="cpu", node=None, dtype=None, threads=None, direct_io=False):
    """The tensors of a safetensors checkpoint as {name: tensor}, each file read once. `path`: a
    .safetensors file, a sharded checkpoint's *.safetensors.index.json, or a folder holding one of
    them. Each file is read by `threads` threads (default: one per hardware thread, at most 16),
    with O_DIRECT when `direct_io` (the page cache then keeps no second copy); the readers run on
    NUMA node `node`'s CPUs when it is given (for a GPU target: its node by default).

    device "cpu": tensors in one umem block per file on `node` (default: the configured
    placement). device "cuda"/"cuda:N" on a unified GPU (APUs, where device memory is host
    memory): the block is on GPU N's NUMA node (or `node`) and the tensors alias it, no copy. On a
    discrete GPU: one block of the GPU's memory per file, filled through two small pinned buffers
    with asynchronous copies, so host memory never holds the model. Tensors are views of their
    file's block, which lives while any of them does. `dtype` converts floating point tensors (a
    copy for those only). A file that breaks the format raises umem.UmemError naming the file, the
    tensor and the rule."""
    lib = _lib.lib()
    ck = _lib.take_json(lib.umem_torch_checkpoint_json(os.fsencode(os.fspath(path))))
    target, gpu = _gpu_target(device)
    if gpu is not None and node is None:
        node = gpu["numa_node"]
    staged = gpu is not None and gpu["memory"] == "device"
    node = -1 if node is None else int(node)
    out = {}
    for file in ck["files"]:
        if staged:
            layout, data = _stage_into_device(file, target, node, threads, direct_io)
        else:
            layout, data = _read_into_host_block(file, node, threads, direct_io)
        # One block per file: the GPU can use all of it in place or none of it.
        alias_on_gpu = (gpu is not None and not staged and data is not None
                        and gpu_access(data)["accessible"])
        for t in layout["tensors"]:
            if t["name"] in out:
                raise UmemTorchError(f"load_safetensors(): tensor '{t['name']}' is in {file} and "
                                     "in an earlier file of the checkpoint")
            d = _torch_dtype(t["dtype"], file, t["name"])
            in_block = False
            if t["end"] == t["begin"]:
                x = torch.empty(t["shape"], dtype=d)
            else:
                raw = data[t["begin"]:t["end"]]
                # view(dtype) needs the offset aligned to the element: else one copy of it.
                in_block = t["begin"] % _itemsize(d) == 0
                x = (raw if in_block else raw.clone()).view(d).view(t["shape"])
            if dtype is not None and x.is_floating_point() and x.dtype != dtype:
                x = x.to(dtype)
                in_block = False
            if gpu is not None and x.device != target:
                alias = not staged and (alias_on_gpu if in_block else gpu_access(x)["accessible"])
                x = as_device(x, target) if alias else x.to(target)
            out[t["name"]] = x
        del data
    for name, file in ck["weight_map"].items():
        if name not in out:
            raise UmemTorchError(f"load_safetensors(): the index names tensor '{name}' in {file}, "
                                 "which does not hold it")
    return out


@contextlib.contextmanager
def meta_parameters():
    """Inside this context every parameter a module registers goes to the meta device as it is
    registered, so building a model costs no parameter memory, while the buffers it computes
    (rotary frequencies, masks) stay real: the model to give load_into(). Each parameter exists
    in real memory only until its module registers it. Uses PyTorch's global parameter
    registration hook (PyTorch >= 2.0); the hook is removed on exit, also on an error."""
    hooks = getattr(torch.nn.modules.module, "register_module_parameter_registration_hook", None)
    if hooks is None:
        raise UmemTorchError(f"umem.torch.meta_parameters(): PyTorch {torch.__version__} has no "
                             "parameter registration hook (PyTorch >= 2.0 has)")

    def to_meta(module, name, param):
        if param is None or param.is_meta:
            return None  # a tie (the same Parameter registered again) stays the same object
        return torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)

    handle = hooks(to_meta)
    try:
        yield
    finally:
        handle.remove()


def load_into(model, path, *, strict=True, **options):
    """Fills `model` (built on the meta device, or anywhere) with the tensors of the safetensors
    checkpoint `path`: load_safetensors(path, **options), then every parameter and buffer the
    checkpoint names is replaced by the loaded tensor itself (a parameter stays a Parameter with its
    requires_grad), so the weights are in memory exactly once. Parameters shared under several
    names (tied weights, e.g. an LM head tied to the embedding) stay shared: a name the checkpoint
    omits takes the tensor loaded for its twin. Non-persistent buffers (register_buffer(...,
    persistent=False), such as a rotary embedding's inv_freq) are never in a checkpoint: they keep
    their values and move to the loaded tensors' device; one left on the meta device is an error
    naming it: build the model inside meta_parameters(), which leaves its buffers real.
    strict: the checkpoint must name every parameter and persistent buffer (twins aside) and
    nothing else, else UmemTorchError listing what is missing and what is unexpected. Returns
    `model`."""
    slots = {}   # name -> (module, attribute, is_parameter)
    owners = {}  # id of the current tensor -> names sharing it
    transient = {}  # name -> (module, attribute) of non-persistent buffers
    for module_name, module in model.named_modules(remove_duplicate=False):
        for attr, value in list(module._parameters.items()) + list(module._buffers.items()):
            if value is None:
                continue
            name = f"{module_name}.{attr}" if module_name else attr
            if attr in module._buffers and attr in module._non_persistent_buffers_set:
                transient[name] = (module, attr)
                continue
            slots[name] = (module, attr, attr in module._parameters)
            owners.setdefault(id(value), []).append(name)
    on_meta = sorted(n for n, (m, a) in transient.items() if m._buffers[a].is_meta)
    if on_meta:
        raise UmemTorchError(
            f"load_into(): the non-persistent buffers {on_meta} are on the meta device, and no "
            "checkpoint holds them: build the model inside `with umem.torch.meta_parameters():` "
            "(only its parameters on meta, the buffers it computes real)")
    loaded = load_safetensors(path, **options)
    unexpected = sorted(set(loaded) - set(slots))
    covered = set(loaded)
    for names in owners.values():
        if covered.intersection(names):
            covered.update(names)
    missing = sorted(set(slots) - covered)
    if strict and (missing or unexpected):
        raise UmemTorchError("load_into(): the checkpoint does not match the model: missing "
                             f"{missing or 'nothing'}; unexpected {unexpected or 'nothing'}")
    made = {}
    for names in owners.values():
        source = next((n for n in names if n in loaded), None)
        if source is None:
            continue
        for name in names:
            module, attr, is_parameter = slots[name]
            if is_parameter:
                old = module._parameters[attr]
                key = id(old)
                if key not in made:
                    made[key] = torch.nn.Parameter(loaded[source], requires_grad=old.requires_grad)
                module._parameters[attr] = made[key]
            else:
                module._buffers[attr] = loaded[source]
    device = next((t.device for t in loaded.values()), None)
    for module, attr in transient.values():
        if device is not None and module._buffers[attr].device != device:
            module._buffers[attr] = module._buffers[attr].to(device)
    return model


def residency(t):
    """Where a tensor's memory lives (pages per NUMA node, huge pages, policy, GPU access)."""
    ptr, nbytes = _storage_span(t)
    return _lib.take_json(_lib.lib().umem_torch_residency_json(ptr, max(nbytes, 1)))


def gpu_access(t):
    """{"accessible", "umem", "reason"}: whether the GPU can use t's memory in place."""
    ptr, nbytes = _storage_span(t)
    return _lib.take_json(_lib.lib().umem_torch_gpu_access_json(ptr, max(nbytes, 1)))


# --- DLPack aliases -----------------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]

_KDL_CPU, _KDL_CUDA, _KDL_ROCM = 1, 2, 10
# address of a DLManagedTensor -> (struct, shape array, owner, registration handle or None)
_live_aliases = {}
# Re-entrant: a garbage collection inside a locked section can free another alias, and its
# DLPack deleter (_release_alias) then runs on this same thread and takes the lock again.
_alias_lock = threading.RLock()
_lib.hold_across_fork(_enable_lock, _alias_lock)


@_DELETER
def _release_alias(managed, aliases=_live_aliases, lock=_alias_lock, addressof=ctypes.addressof,
                   lib=_lib):
    # PyTorch calls this when the alias's storage dies (any thread; ctypes takes the GIL), also
    # during interpreter shutdown after this module's globals are cleared: hence the defaults.
    # The registration goes before the owner: the memory must not be freed while registered.
    with lock:
        entry = aliases.pop(addressof(managed.contents), None)
        if entry is not None and entry[3] is not None:
            lib.lib().umem_torch_alias_release(entry[3])


# Never freed, nor what it holds (the registry, so the structs PyTorch points to): an alias in a
# reference cycle dies in the shutdown's last garbage collection, which could otherwise free the
# callback and the registry first, and PyTorch would call into freed memory.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_release_alias))


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _alias(ptr, nbytes, device, owner):
    """A 1-D uint8 tensor on `device` over [ptr, ptr+nbytes), keeping `owner` alive until the
    tensor's storage is freed (through DLPack's deleter). A GPU alias of memory umem did not
    allocate is registered with the GPU runtime for its life where the runtime needs that (HIP:
    umem_torch.h, umem_torch_alias_register); UmemTorchError says why when it cannot be."""
    handle = None
    if device.type != "cpu":
        h = ctypes.c_void_p()
        status = _lib.lib().umem_torch_alias_register(ptr, max(nbytes, 1), ctypes.byref(h))
        if status != _lib.UMEM_OK:
            raise UmemTorchError("cannot alias this memory on the GPU: " + _lib.last_error())
        handle = h.value
    m = _DLManagedTensor()
    shape = (ctypes.c_int64 * 1)(nbytes)
    m.dl_tensor.data = ptr
    if device.type == "cpu":
        m.dl_tensor.device = _DLDevice(_KDL_CPU, 0)
    else:
        kind = _KDL_ROCM if getattr(torch.version, "hip", None) else _KDL_CUDA
        index = device.index if device.index is not None else torch.cuda.current_device()
        m.dl_tensor.device = _DLDevice(kind, index)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = _DLDataType(1, 8, 1)  # uint8; viewed as the real dtype afterwards
    m.dl_tensor.shape = shape
    m.dl_tensor.strides = None
    m.dl_tensor.byte_offset = 0
    m.deleter = _release_alias
    with _alias_lock:
        _live_aliases[ctypes.addressof(m)] = (m, shape, owner, handle)
    capsule = _capsule_new(ctypes.addressof(m), b"dltensor", None)
    return torch.utils.dlpack.from_dlpack(capsule)


def _alias_like(t, device):
    """t's whole storage on `device`, viewed with t's dtype, sizes, strides and offset."""
    ptr, nbytes = _storage_span(t)
    # The owner is a detached view: it holds t's storage even after `t.data = ...` rebinds t
    # (as in `param.data = as_device(param)`), which would otherwise free the aliased memory.
    base = _alias(ptr, nbytes, device, t.detach()).view(t.dtype)
    return base.as_strided(t.size(), t.stride(), t.storage_offset())


def as_device(t, device=None):
    """A GPU tensor aliasing CPU tensor `t`'s memory (no copy), keeping t's memory alive. Valid
    while t's memory is: writes through either are visible to the other after the usual stream
    synchronization (docs/torch-bridge.md). Raises UmemTorchError when the GPU cannot access
    the memory, with the reason (not umem memory and XNACK off, no GPU runtime, ...)."""
    if t.device.type != "cpu":
        raise UmemTorchError(f"as_device(): the tensor is on {t.device}, not the CPU")
    if not torch.cuda.is_available():
        raise UmemTorchError("as_device(): no GPU: torch.cuda.is_available() is False")
    access = gpu_access(t)
    if not access["accessible"]:
        raise UmemTorchError("as_device(): the GPU cannot access this tensor's memory: "
                             + access["reason"])
    target = torch.device("cuda", _device_index(device if device is not None else "cuda"))
    return _alias_like(t, target)


def as_host(t, synchronize=True):
    """A CPU tensor aliasing GPU tensor `t`'s memory (no copy), keeping t's memory alive. With
    synchronize (default), waits for t's device's current stream first, so work queued on it
    (the usual producer) is visible; pass False when you synchronize yourself. Only umem memory
    qualifies (umem.torch.enable() before the tensor was made)."""
    if t.device.type != "cuda":
        raise UmemTorchError(f"as_host(): the tensor is on {t.device}, not a GPU")
    access = gpu_access(t)
    if not access["umem"]:
        raise UmemTorchError(
            "as_host(): this GPU tensor's memory is not from umem, so the CPU may not be able to "
            "use it in place (call umem.torch.enable() before creating GPU tensors): "
            + access["reason"])
    if not access.get("host_accessible", True):
        raise UmemTorchError("as_host(): the CPU cannot use this GPU tensor's memory in place: "
                             + access["reason"] + "; copy it with .cpu()")
    if synchronize:
        torch.cuda.current_stream(t.device).synchronize()
    return _alias_like(t, torch.device("cpu"))


# --- zero_copy() mode (python/umem/zero_copy.py) -----------------------------------------------

def __getattr__(name):
    # Resolved on first use: zero_copy.py imports this module, so an import at load time would
    # fail whenever umem.zero_copy is imported first.
    if name in ("zero_copy", "ZeroCopyLog"):
        from . import zero_copy as module
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- rank binding -------------------------------------------------------------------------------

# Launchers and the variables they set, in the order they are consulted.
RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                  "MPI_LOCALRANKID", "SLURM_LOCALID", "FLUX_TASK_LOCAL_ID")
SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE",
                  "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")


def _from_env(names):
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value), name
            except ValueError as e:
                raise UmemTorchError(f"bind_local_rank(): {name}={value!r} is not an integer") from e
    return None, None


def bind_local_rank(local_rank=None, local_size=None, topology=None, apply=True,
                    memory_policy="bind"):
    """Binds this process to the APU of its local rank: CPUs (sched_setaffinity), memory policy
    (set_mempolicy `memory_policy`: "bind", "preferred" or None) and the current GPU
    (torch.cuda.set_device). The rank comes from `local_rank` or the launcher's variables
    (RANK_VARIABLES: torchrun, Open MPI, MVAPICH, MPICH/Intel MPI, Slurm, Flux), the size
    likewise. `topology` (a snapshot dict, JSON text or file) computes the binding for that
    machine; applying it is refused then, as it describes another machine. Returns the binding
    as a dict: local_rank, local_size, numa_node, cpus, device, gpu_kfd_node, evidence, source.
    Call enable() first when umem is to be PyTorch's allocator: selecting the device initialises
    CUDA, after which PyTorch refuses to swap its allocator."""
    source = "argument"
    if local_rank is None:
        local_rank, source = _from_env(RANK_VARIABLES)
        if local_rank is None:
            raise UmemTorchError("bind_local_rank(): no local rank: pass local_rank or launch with "
                                 "torchrun, mpirun or srun (variables: "
                                 + ", ".join(RANK_VARIABLES) + ")")
    if local_size is None:
        local_size, _ = _from_env(SIZE_VARIABLES)
    if topology is not None and apply:
        raise UmemTorchError("bind_local_rank(): the given topology describes another machine (a "
                             "snapshot); pass apply=False to compute its binding, or no topology "
                             "to bind on this one")
    text = _snapshot_text(topology)
    binding = _lib.take_json(_lib.lib().umem_torch_rank_binding_json(
        None if text is None else text.encode(), int(local_rank), int(local_size or 0)))
    binding["source"] = source
    if apply:
        _apply_binding(binding, memory_policy)
    return binding


def _apply_binding(b, memory_policy):
    if b["cpus"]:
        try:
            os.sched_setaffinity(0, b["cpus"])
        except OSError as e:
            raise UmemTorchError(f"bind_local_rank(): cannot pin to CPUs of NUMA node "
                                 f"{b['numa_node']} ({e}); the launcher may have restricted this "
                                 "process to other CPUs (e.g. srun --cpu-bind)") from e
    if memory_policy:
        _lib.check(_lib.lib().umem_torch_set_memory_policy(b["numa_node"], memory_policy.encode()))
    if b["device"] >= 0 and torch.cuda.is_available():
        torch.cuda.set_device(b["device"])


if __name__ == "__main__":  # python -m umem.torch build: the allocator extension, ahead of time
    from umem import _extension as _ext
    sys.exit(_ext.main(sys.argv[1:]))
