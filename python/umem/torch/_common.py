"""What every module of umem.torch shares: its exception and the device and storage helpers."""
import torch


class UmemTorchError(RuntimeError):
    """umem.torch cannot do what was asked here; the message says why and what to do."""


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


def _storage_span(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr(), s.nbytes()


def _itemsize(dtype):
    return torch.empty((), dtype=dtype).element_size()
