"""CPU tensors in umem memory, where a tensor's memory lives, and DLPack aliases that show one
memory to the CPU and the GPU without a copy (docs/torch-bridge.md: ownership and validity)."""
import atexit
import ctypes
import threading

import torch

from .. import _lib
from ._common import UmemTorchError, _device_index, _itemsize, _storage_span
from .deferred_releases import DeferredReleases


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


def residency(t):
    """Where a tensor's memory lives (pages per NUMA node, huge pages, policy, GPU access)."""
    ptr, nbytes = _storage_span(t)
    return _lib.take_json(_lib.lib().umem_torch_residency_json(ptr, max(nbytes, 1)))


def gpu_access(t):
    """{"accessible", "umem", "host_accessible", "registrable", "reason"}: whether the GPU can use
    t's memory in place; "registrable" when it cannot yet, but an alias (as_device, zero_copy())
    registers it with the GPU runtime for the alias's life (memory umem did not allocate, with
    HIP and XNACK off on an APU: pinned, docs/cpu-tensors.md)."""
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
_lib.hold_across_fork(_alias_lock)


# Registrations wait for the GPU when released: on a thread of their own (Note [Deferred
# releases] in deferred_releases.py). Four at most: a batch or two per step of a training loop.
def _release_registration(handle, lib=_lib):
    lib.lib().umem_torch_alias_release(handle)


_releases = DeferredReleases(_release_registration, 4)
atexit.register(_releases.settle)


@_DELETER
def _release_alias(managed, aliases=_live_aliases, lock=_alias_lock, addressof=ctypes.addressof,
                   releases=_releases):
    # PyTorch calls this when the alias's storage dies (any thread; ctypes takes the GIL), also
    # during interpreter shutdown after this module's globals are cleared: hence the defaults.
    # The registration goes before the owner: the releases keep the owner until it is released.
    with lock:
        entry = aliases.pop(addressof(managed.contents), None)
    if entry is not None and entry[3] is not None:
        releases.put(entry[3], entry[2])


# Never freed, nor what it holds (the registry, so the structs PyTorch points to): an alias in a
# reference cycle dies in the shutdown's last garbage collection, which could otherwise free the
# callback and the registry first, and PyTorch would call into freed memory.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_release_alias))


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _alias(ptr, nbytes, device, owner, register=None):
    """A 1-D uint8 tensor on `device` over [ptr, ptr+nbytes), keeping `owner` alive until the
    tensor's storage is freed (through DLPack's deleter). A GPU alias (or a CPU one with
    `register`) of memory umem did not allocate is registered with the GPU runtime for its life
    where the runtime needs that (HIP: umem_torch.h, umem_torch_alias_register); UmemTorchError
    says why when it cannot be."""
    handle = None
    if device.type != "cpu" if register is None else register:
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


def _alias_like(t, device, register=None):
    """t's whole storage on `device`, viewed with t's dtype, sizes, strides and offset."""
    ptr, nbytes = _storage_span(t)
    # The owner is a detached view: it holds t's storage even after `t.data = ...` rebinds t
    # (as in `param.data = as_device(param)`), which would otherwise free the aliased memory.
    base = _alias(ptr, nbytes, device, t.detach(), register).view(t.dtype)
    return base.as_strided(t.size(), t.stride(), t.storage_offset())


def _as_registered(t):
    """A CPU tensor aliasing CPU tensor `t`'s memory, registered with the GPU runtime for the
    alias's life: what pin_memory() returns inside zero_copy() for memory umem did not allocate
    that gpu_access calls registrable."""
    return _alias_like(t, torch.device("cpu"), register=True)


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
    if not access["accessible"] and not access.get("registrable"):
        raise UmemTorchError("as_device(): the GPU cannot access this tensor's memory: "
                             + access["reason"])
    return _device_alias(t, device)


def _device_alias(t, device=None):
    """as_device() past its checks, for a caller that made them (zero_copy() asks gpu_access once
    per conversion: each ask is a call into the bridge)."""
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
    return _host_alias(t, synchronize)


def _host_alias(t, synchronize=True):
    """as_host() past its checks, for a caller that made them (as _device_alias)."""
    if synchronize:
        torch.cuda.current_stream(t.device).synchronize()
    return _alias_like(t, torch.device("cpu"))
