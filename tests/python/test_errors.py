"""Clear errors where umem.torch cannot do what was asked."""
import os

import pytest
import torch

import umem.torch as ut


@pytest.mark.skipif(ut.enabling._has_pluggable_allocator(),
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


def test_empty_past_the_nodes_memory_raises_out_of_memory_naming_the_node():
    # The Python half of tests/vm_guest/torch_host_exhaustion_test.cpp, which fills a real node
    # through the same C call in the 4-node VM (no Python there): the OOM status reaches the
    # caller as umem.UmemError with that status, not as a crash or a None tensor. Four times the
    # machine's memory on node 0 is refused before a page is asked for, so this fills nothing:
    # by the kernel's mmap (overcommit heuristic) or, where overcommit is always on, by the host
    # NUMA source's check of what the node can give (numa/include/umem/numa/node_meminfo.hpp).
    import umem
    nbytes = 4 * os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    before = ut.memory_stats(-1)
    with pytest.raises(umem.UmemError) as e:
        ut.empty(nbytes, dtype=torch.uint8, node=0)
    assert e.value.status == "UMEM_ERR_OUT_OF_MEMORY", str(e.value)
    assert "node 0" in str(e.value)
    after = ut.memory_stats(-1)
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert after["allocation.all.current"] == before["allocation.all.current"]
    assert ut.empty(16, node=0).numel() == 16  # still serving
