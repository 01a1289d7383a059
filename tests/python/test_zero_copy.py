"""zero_copy() decisions; on a CPU-only PyTorch every conversion falls back to a real copy and
the log says why."""
import pytest
import torch

import umem.torch as ut


def test_dtype_change_copies_correctly_and_says_why():
    x = ut.empty(8, dtype=torch.float32, node=0)
    x.copy_(torch.arange(8, dtype=torch.float32))
    with ut.zero_copy() as log:
        y = x.to(torch.float64)
    assert y.dtype == torch.float64 and y.tolist() == list(range(8))
    assert y.data_ptr() != x.data_ptr()
    assert log.events == [("to", "copy", "no device change")]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_device_change_without_gpu_falls_back_with_reason():
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        with pytest.raises((AssertionError, RuntimeError)):  # CPU-only torch cannot copy either
            x.to("cuda")
    assert log.events == [("to", "copy", "no GPU: torch.cuda.is_available() is False")]


@pytest.mark.parametrize("make,reason", [
    (lambda: torch.arange(12.0).view(3, 4).t(), "non-contiguous tensor"),
    (lambda: torch.arange(4.0).requires_grad_(), "the tensor requires grad"),
])
def test_reasons_for_copies_before_device_checks(make, reason):
    x = make()
    with ut.zero_copy() as log:
        try:
            x.to("cuda")
        except (AssertionError, RuntimeError):
            pass  # CPU-only torch
    assert log.events[0][1] == "copy" and log.events[0][2].startswith(reason)


def test_copy_true_and_dtype_with_device_fall_back():
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        y = x.to("cpu", copy=True)
    assert y.data_ptr() != x.data_ptr() and y.tolist() == x.tolist()
    assert log.events == [("to", "copy", "copy=True asks for a copy")]


def test_strict_mode_raises_instead_of_copying():
    x = torch.arange(12.0).view(3, 4).t()
    with ut.zero_copy(strict=True):
        with pytest.raises(ut.UmemTorchError, match="non-contiguous"):
            x.to("cuda")


def test_methods_are_restored_after_the_block():
    to = torch.Tensor.to
    with ut.zero_copy():
        assert torch.Tensor.to is not to
    assert torch.Tensor.to is to
