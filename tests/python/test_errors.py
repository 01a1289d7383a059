"""Clear errors where umem.torch cannot do what was asked."""
import pytest
import torch

import umem.torch as ut


@pytest.mark.skipif(ut._has_pluggable_allocator(),
                    reason="this PyTorch has CUDAPluggableAllocator")
def test_enable_on_pytorch_without_pluggable_allocator_names_the_version():
    with pytest.raises(ut.UmemTorchError, match=r"PyTorch >= 2.0 is needed") as e:
        ut.enable()
    assert torch.__version__ in str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_as_device_without_gpu():
    with pytest.raises(ut.UmemTorchError, match="no GPU"):
        ut.as_device(ut.empty(4, node=0))


def test_as_host_of_a_cpu_tensor_is_refused():
    with pytest.raises(ut.UmemTorchError, match="not a GPU"):
        ut.as_host(torch.zeros(2))


def test_gpu_access_of_torch_memory_explains():
    a = ut.gpu_access(torch.zeros(1024))
    assert a["umem"] is False
    if not a["accessible"]:
        assert "umem.torch.empty" in a["reason"]


def test_memory_summary_is_text():
    s = ut.memory_summary(-1)
    assert "allocated_bytes" in s and "num_ooms" in s
