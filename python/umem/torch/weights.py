"""Model weights from safetensors checkpoints (Note [Reading weights] in
weights/safetensors_file.hpp), and models built without parameter memory to load them into."""
import contextlib
import os

import torch

from .. import _lib
from ._common import UmemTorchError, _itemsize
from .host_tensors import _alias, _device_alias, _HostBlock, gpu_access


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
                # Asked here (once per file for the block's views), so the alias needs no
                # second ask: as_device() would make the same gpu_access call again.
                alias = not staged and (alias_on_gpu if in_block else gpu_access(x)["accessible"])
                x = _device_alias(x, target) if alias else x.to(target)
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
