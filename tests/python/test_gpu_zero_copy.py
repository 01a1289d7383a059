"""zero_copy() on a real GPU with PyTorch >= 2.0 (umem enabled by conftest.py's umem_gpu): tensors
and whole modules in umem memory move to the GPU without a copy and train exactly like copies."""
import copy

import pytest
import torch
from torch import nn

import umem.torch as ut

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("umem_gpu")]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8)
        self.norm = nn.LayerNorm(8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.norm(self.linear(x)) * self.scale


def in_umem(model, node):
    for t in list(model.parameters()) + list(model.buffers()):
        u = ut.empty(t.shape, dtype=t.dtype, node=node)
        u.copy_(t.detach())
        t.data = u
    return model


def named_tensors(model):
    return dict(list(model.named_parameters()) + list(model.named_buffers()))


def test_zero_copy_mode_aliases_and_falls_back(umem_gpu):
    x = ut.empty(1024, dtype=torch.float32, node=umem_gpu)
    x.copy_(torch.arange(1024.0))
    with ut.zero_copy() as log:
        y = x.to("cuda")
        z = y.cpu()
        w = x.to("cuda", dtype=torch.float64)
        v = x.view(32, 32).t().cuda()
    assert y.data_ptr() == x.data_ptr() and z.data_ptr() == x.data_ptr()
    assert w.data_ptr() != x.data_ptr() and w.dtype == torch.float64
    assert torch.equal(w.cpu(), x.double()) and torch.equal(v.cpu(), x.view(32, 32).t())
    assert [e[1] for e in log.events] == ["alias", "alias", "copy", "copy"]
    assert log.events[2][2].startswith("dtype change")
    assert log.events[3][2] == "non-contiguous tensor"


def test_each_conversion_asks_the_bridge_once(umem_gpu, monkeypatch):
    # zero_copy() decides with one gpu_access per conversion; as_device's and as_host's own
    # checks (the same question again) are not repeated inside the mode.
    from umem import _lib
    lib = _lib.lib()
    real = lib.umem_torch_gpu_access_json
    asked = []

    def counting(ptr, size):
        asked.append(ptr)
        return real(ptr, size)

    monkeypatch.setattr(lib, "umem_torch_gpu_access_json", counting)
    x = ut.empty(1024, dtype=torch.float32, node=umem_gpu)
    with ut.zero_copy() as log:
        y = x.to("cuda")
        z = y.cpu()
    assert [e[1] for e in log.events] == ["alias", "alias"]
    assert z.data_ptr() == x.data_ptr()
    assert asked == [x.data_ptr(), y.data_ptr()]


def test_moving_a_module_aliases_it_and_it_trains_like_a_copy(umem_gpu):
    torch.manual_seed(0)
    model = in_umem(Net(), umem_gpu)
    reference = copy.deepcopy(model).to("cuda")  # PyTorch's copy, outside the mode
    pointers = {name: t.data_ptr() for name, t in named_tensors(model).items()}
    host = {name: t.detach() for name, t in named_tensors(model).items()}  # the umem memory
    start = {name: t.clone() for name, t in host.items()}
    with ut.zero_copy() as log:
        assert model.to("cuda") is model
    assert len(log.aliases) == len(log.events) == 5, log.events
    for name, t in named_tensors(model).items():
        assert t.device.type == "cuda" and t.data_ptr() == pointers[name], name
    for p in model.parameters():
        assert isinstance(p, nn.Parameter) and p.is_leaf and p.requires_grad
    assert model.linear.weight.is_leaf

    x = torch.randn(32, 16, device="cuda")
    loss = model(x).square().mean()
    expected = reference(x).square().mean()
    assert torch.allclose(loss, expected, rtol=1e-6, atol=0)
    loss.backward()
    expected.backward()
    theirs = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, theirs[name].grad, rtol=1e-5, atol=1e-7), name

    torch.optim.SGD(model.parameters(), lr=0.1).step()
    torch.optim.SGD(reference.parameters(), lr=0.1).step()
    torch.cuda.synchronize()
    for name, p in model.named_parameters():  # the step wrote the CPU-side memory in place
        assert not torch.equal(host[name], start[name]), name
        assert torch.allclose(host[name], theirs[name].detach().cpu(), rtol=1e-5, atol=1e-7)


def test_grad_enabled_move_sends_gradients_back_to_the_source(umem_gpu):
    x = ut.empty(256, node=umem_gpu)
    with torch.no_grad():
        x.copy_(torch.linspace(-1, 1, 256))
    x.requires_grad_()
    copied = x.detach().clone().requires_grad_()
    w = torch.randn(256, device="cuda")
    with ut.zero_copy() as log:
        y = x.to("cuda")
    assert log.events == [("to", "alias", "cpu -> cuda")]
    assert y.data_ptr() == x.data_ptr() and y.requires_grad and not y.is_leaf
    (y.sin() * w).sum().backward()
    (copied.to("cuda").sin() * w).sum().backward()
    assert x.grad.device.type == "cpu"
    assert torch.allclose(x.grad, copied.grad, rtol=1e-6, atol=1e-7)
