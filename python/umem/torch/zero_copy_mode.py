"""zero_copy(): a TorchFunctionMode in which Tensor.to / .cuda / .cpu return aliases (as_device /
as_host) instead of copies where the target side can use the memory in place, so that moving a
model whose parameters live in umem memory moves nothing, and Tensor.pin_memory returns the
tensor itself where the GPU can use its memory in place already (what pinning is for). Memory
umem did not allocate that the GPU cannot reach (XNACK off) is registered with the GPU runtime
for the alias's life where the runtime allows it. docs/torch-bridge.md gives the rules.

Note [Who handles a call]: a TorchFunctionMode is per thread, and while its __torch_function__ runs
PyTorch pops it off the thread's mode stack, so the functions it calls go to the modes below it
(or to PyTorch itself) and never back into it. The innermost zero_copy() on the thread decides; it
records the event in its own log and in the log of every zero_copy() enclosing it, and applies its
own `strict`. While it converts (and while an alias's backward moves a gradient), a thread-local
flag (_Converting) makes every other zero_copy() forward calls untouched, so the copy PyTorch
makes, and the tensor calls inside the alias primitives, are neither decided nor logged a second
time. Modes of other kinds still see every call.
"""
import threading

import torch
from torch.overrides import TorchFunctionMode

from ._common import UmemTorchError, _device_index
from .host_tensors import _as_registered, _device_alias, _host_alias, gpu_access

_OPERATIONS = {torch.Tensor.to: "to", torch.Tensor.cuda: "cuda", torch.Tensor.cpu: "cpu",
               torch.Tensor.pin_memory: "pin_memory"}


class ZeroCopyLog:
    """What zero_copy() did: `events` is a list of (operation, "alias" | "copy", reason)."""

    def __init__(self, strict):
        self.strict = strict
        self.events = []

    @property
    def aliases(self):
        return [e for e in self.events if e[1] == "alias"]

    @property
    def copies(self):
        return [e for e in self.events if e[1] == "copy"]


class _Target:
    """What the mode needs from the GPU side, in one place. Tests on machines without a GPU
    replace the module's `_target` with a double (monkeypatch) to exercise every decision."""

    gpu_available = staticmethod(torch.cuda.is_available)
    gpu_access = staticmethod(gpu_access)
    # The aliases without as_device's and as_host's own checks: _why_not_alias made them.
    as_device = staticmethod(_device_alias)
    as_host = staticmethod(_host_alias)
    as_registered = staticmethod(_as_registered)


_target = _Target()

# Per thread: the zero_copy() modes entered (innermost last) and whether one is converting.
_local = threading.local()


def _active():
    if not hasattr(_local, "modes"):
        _local.modes = []
    return _local.modes


class _Converting:
    """Marks the calling thread as inside a conversion (Note [Who handles a call])."""

    def __enter__(self):
        self.outer = getattr(_local, "converting", False)
        _local.converting = True

    def __exit__(self, *exc):
        _local.converting = self.outer


class _Request:
    """A parsed to() / cuda() / cpu() call."""

    def __init__(self, device, dtype=None, non_blocking=False, memory_format=None, copy=False):
        self.device, self.dtype, self.non_blocking = device, dtype, non_blocking
        self.memory_format, self.copy = memory_format, copy


def _to_request(t, *args, **kwargs):
    copy = kwargs.pop("copy", False)
    if len(args) >= 4:  # to(device, dtype, non_blocking, copy)
        copy = copy or bool(args[3])
        args = args[:3]
    if args and isinstance(args[0], torch.Tensor):  # to(other, non_blocking)
        non_blocking = bool(args[1]) if len(args) > 1 else kwargs.get("non_blocking", False)
        return _Request(args[0].device, args[0].dtype, non_blocking, kwargs.get("memory_format"),
                        copy)
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
    return _Request(device, dtype, non_blocking, memory_format, copy)


def _cuda_request(t, device=None, non_blocking=False, memory_format=None):
    target = torch.device("cuda", _device_index(device if device is not None else "cuda")) \
        if torch.cuda.is_available() else torch.device("cuda")
    return _Request(target, None, non_blocking, memory_format)


def _cpu_request(t, memory_format=None):
    return _Request(torch.device("cpu"), memory_format=memory_format)


def _pin_request(t, device=None):
    # Pinning keeps the tensor on the CPU; what it asks is that the GPU may use the memory.
    return _Request(torch.device("cuda"))


_PARSERS = {"to": _to_request, "cuda": _cuda_request, "cpu": _cpu_request,
            "pin_memory": _pin_request}


def _pin_plan(t):
    """("itself", None) when `t`'s memory is usable by the GPU in place (pin_memory may return t);
    ("register", None) when an alias registered for its life makes it so; else (None, the reason
    PyTorch's pin_memory copies it)."""
    if t.device.type != "cpu":
        return None, f"the tensor is on {t.device}, not the CPU"
    if not _target.gpu_available():
        return None, "no GPU: torch.cuda.is_available() is False"
    access = _target.gpu_access(t)
    if access["accessible"]:
        return "itself", None
    if access.get("registrable"):
        return "register", None
    return None, "the GPU cannot access it: " + access["reason"]


def _why_not_alias(t, request):
    """None when `t` may be aliased as `request` asks; else the reason for a real copy."""
    device = request.device
    if request.copy:
        return "copy=True asks for a copy"
    if device is None or device.type == t.device.type:
        return "no device change"
    if request.dtype is not None and request.dtype != t.dtype:
        return f"dtype change ({t.dtype} -> {request.dtype}) needs new memory"
    if t.layout != torch.strided:
        return f"layout {t.layout} is not strided"
    if request.memory_format not in (None, torch.preserve_format) and \
            not t.is_contiguous(memory_format=request.memory_format):
        return f"memory format change to {request.memory_format}"
    if not t.is_contiguous():
        return "non-contiguous tensor"
    if device.type != "cpu" and t.device.type != "cpu":
        return f"only CPU tensors are aliased on a GPU (this one is on {t.device})"
    if not _target.gpu_available():
        return "no GPU: torch.cuda.is_available() is False"
    access = _target.gpu_access(t)
    if device.type == "cpu" and not access["umem"]:
        return "the GPU tensor's memory is not umem's: " + access["reason"]
    if device.type == "cpu" and not access.get("host_accessible", True):
        return "the CPU cannot use it in place: " + access["reason"]
    if device.type != "cpu" and not access["accessible"] and not access.get("registrable"):
        return "the GPU cannot access it: " + access["reason"]
    return None


def _alias(t, device, non_blocking):
    # A detached source owns the memory: Module._apply assigns the alias to param.data, which
    # swaps the parameter's storage, so the parameter itself would no longer keep the memory alive.
    source = t.detach()
    if device.type == "cpu":
        return _target.as_host(source, synchronize=not non_blocking)
    return _target.as_device(source, device)


class _AliasFunction(torch.autograd.Function):
    """An alias as an autograd node, for a tensor that requires grad while grad mode is on: the
    gradient goes back to the source's device as PyTorch's copy would send it, aliased where the
    rules allow it, else copied."""

    @staticmethod
    def forward(ctx, t, device, non_blocking):
        ctx.source_device = t.device
        return _alias(t, device, non_blocking)

    @staticmethod
    def backward(ctx, grad):
        device = ctx.source_device
        with _Converting():
            if grad.device != device:
                if _why_not_alias(grad, _Request(device)) is None:
                    grad = _alias(grad, device, non_blocking=False)
                else:
                    grad = grad.to(device)
        return grad, None, None


class zero_copy(TorchFunctionMode):
    """Inside `with zero_copy() as log:`, Tensor.to(device), .cuda() and .cpu() on this thread
    return aliases (as_device / as_host) of contiguous tensors whose memory the target side can
    use in place, also when nn.Module.to/cuda/cpu moves parameters and buffers, and
    Tensor.pin_memory() returns the tensor itself when the GPU can use its memory in place (umem
    memory on a GPU-visible segment; on a unified machine every CPU tensor once enable_host()
    ran). Memory umem did not allocate (numpy, mmap'd files, shared memory) that the GPU cannot
    reach is registered with the GPU runtime for the alias's life (HIP, XNACK off), where the
    runtime allows it; pin_memory() then returns a registered alias. The pin step of a DataLoader
    runs on its own thread, outside this mode: there PyTorch's pin_memory returns the tensor
    itself when is_pinned() says so (docs/cpu-tensors.md). Other calls run
    PyTorch's own method (a real copy); the yielded ZeroCopyLog records every decision with its
    reason. strict=True raises UmemTorchError instead of copying. Per thread and nestable: the
    innermost block decides, every enclosing block's log records the event too."""

    def __init__(self, strict=False):
        super().__init__()
        self.log = ZeroCopyLog(strict)
        self._logs = [self.log]

    def __enter__(self):
        active = _active()
        self._logs = [m.log for m in active] + [self.log]
        super().__enter__()
        active.append(self)
        return self.log

    def __exit__(self, exc_type, exc_value, traceback):
        _active().remove(self)
        return super().__exit__(exc_type, exc_value, traceback)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        operation = _OPERATIONS.get(func)
        if operation is None or getattr(_local, "converting", False):
            return func(*args, **kwargs)
        with _Converting():
            return self._convert(operation, func, args, kwargs)

    def _convert(self, operation, func, args, kwargs):
        t = args[0]
        if operation == "pin_memory":
            return self._pin(func, args, kwargs)
        request = _PARSERS[operation](*args, **kwargs)
        reason = _why_not_alias(t, request)
        if reason is None:
            try:  # the GPU runtime may still refuse the memory (umem_torch_alias_register)
                if t.requires_grad and torch.is_grad_enabled():
                    out = _AliasFunction.apply(t, request.device, request.non_blocking)
                else:
                    out = _alias(t, request.device, request.non_blocking)
            except UmemTorchError as e:
                reason = str(e)
            else:
                self._record(operation, "alias", f"{t.device} -> {request.device}")
                return out
        self._record(operation, "copy", reason)
        if self.log.strict and reason != "no device change":
            raise UmemTorchError(f"zero_copy(strict=True): {operation} would copy: {reason}")
        return func(*args, **kwargs)

    def _pin(self, func, args, kwargs):
        t = args[0]
        _pin_request(*args, **kwargs)  # rejects arguments pin_memory does not take
        plan, reason = _pin_plan(t)
        if plan == "itself":
            self._record("pin_memory", "alias", "GPU-usable in place: the tensor itself")
            return t
        if plan == "register":
            try:  # the GPU runtime may still refuse the memory (read-only pages, ...)
                out = _target.as_registered(t)
            except UmemTorchError as e:
                reason = str(e)
            else:
                self._record("pin_memory", "alias",
                             "registered with the GPU runtime for the alias's life")
                return out
        self._record("pin_memory", "copy", reason)
        if self.log.strict:
            raise UmemTorchError(f"zero_copy(strict=True): pin_memory would copy: {reason}")
        return func(*args, **kwargs)

    def _record(self, operation, kind, reason):
        for log in self._logs:
            log.events.append((operation, kind, reason))
