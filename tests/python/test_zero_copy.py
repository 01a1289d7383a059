"""zero_copy() decisions. Without a GPU the real aliases cannot be made, so most tests put a
stand-in for the GPU side in umem.torch.zero_copy_mode._target (FakeGpu): every memory counts as usable in
place and the alias primitives return a CPU tensor over the same memory, recording each call.
The decisions, the module and autograd handling, threads and nesting are then exercised for real.
"""
import os
import subprocess
import sys
import threading

import pytest
import torch
from torch import nn

import umem.torch as ut
import umem.torch.zero_copy_mode as zc


class FakeGpu:
    """Stands in for zc._target: a GPU that can use any memory in place."""

    def __init__(self):
        self.calls = []  # (primitive, source tensor, device or synchronize)

    def gpu_available(self):
        return True

    def gpu_access(self, t):
        return {"accessible": True, "umem": True, "reason": "fake GPU"}

    def as_device(self, t, device=None):
        self.calls.append(("as_device", t, device))
        return t.detach()

    def as_host(self, t, synchronize=True):
        self.calls.append(("as_host", t, synchronize))
        return torch.full(t.shape, 7.0, dtype=t.dtype)


@pytest.fixture
def fake_gpu(monkeypatch):
    gpu = FakeGpu()
    monkeypatch.setattr(zc, "_target", gpu)
    return gpu


def swallow_cpu_only_torch(f):
    """Runs f; a CPU-only PyTorch cannot make a CUDA tensor, which is what its own method does."""
    try:
        f()
    except (AssertionError, RuntimeError) as e:
        assert "CUDA" in str(e) or "cuda" in str(e), e


class Net(nn.Module):
    """Linear + LayerNorm + a buffer: 4 parameters and 1 buffer, all in umem memory."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 3))
        for t in list(self.parameters()) + list(self.buffers()):
            u = ut.empty(t.shape, dtype=t.dtype, node=0)
            u.copy_(t.detach())
            t.data = u

    def forward(self, x):
        return self.norm(self.linear(x)) * self.scale


def tensors(model):
    return dict(list(model.named_parameters()) + list(model.named_buffers()))


# --- decisions and reasons ----------------------------------------------------------------------

def test_dtype_change_copies_correctly_and_says_why():
    x = ut.empty(8, dtype=torch.float32, node=0)
    x.copy_(torch.arange(8, dtype=torch.float32))
    with ut.zero_copy() as log:
        y = x.to(torch.float64)
    assert y.dtype == torch.float64 and y.tolist() == list(range(8))
    assert y.data_ptr() != x.data_ptr()
    assert log.events == [("to", "copy", "no device change")]


def test_only_cpu_tensors_are_aliased_on_a_gpu(fake_gpu):
    # The fake GPU would take any memory: the source's device alone decides here.
    x = torch.empty(4, device="meta")
    with ut.zero_copy() as log:
        swallow_cpu_only_torch(lambda: x.to("cuda"))
    assert log.events == [("to", "copy", "only CPU tensors are aliased on a GPU (this one is on "
                                         "meta)")]
    assert fake_gpu.calls == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_device_change_without_gpu_falls_back_with_reason():
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        with pytest.raises((AssertionError, RuntimeError)):  # CPU-only torch cannot copy either
            x.to("cuda")
    assert log.events == [("to", "copy", "no GPU: torch.cuda.is_available() is False")]
    assert log.copies == log.events and log.aliases == []


def test_non_contiguous_copies_before_any_device_check(fake_gpu):
    x = torch.arange(12.0).view(3, 4).t()
    with ut.zero_copy() as log:
        swallow_cpu_only_torch(lambda: x.to("cuda"))
    assert log.events == [("to", "copy", "non-contiguous tensor")]
    assert fake_gpu.calls == []


def test_copy_true_copies_even_where_an_alias_could_be_made(fake_gpu):
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        y = x.to("cpu", copy=True)
        swallow_cpu_only_torch(lambda: x.to("cuda", copy=True))
        swallow_cpu_only_torch(lambda: x.to("cuda", None, False, True))
    assert y.data_ptr() != x.data_ptr() and y.tolist() == x.tolist()
    assert log.events == [("to", "copy", "copy=True asks for a copy")] * 3
    assert fake_gpu.calls == []


def test_dtype_change_with_device_change_copies(fake_gpu):
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        swallow_cpu_only_torch(lambda: x.to("cuda", torch.float64))
        swallow_cpu_only_torch(lambda: x.to(device="cuda", dtype=torch.float16))
    assert [e[2] for e in log.events] == ["dtype change (torch.float32 -> torch.float64) needs "
                                          "new memory", "dtype change (torch.float32 -> "
                                          "torch.float16) needs new memory"]
    assert fake_gpu.calls == []


def test_target_that_cannot_use_the_memory_copies_with_its_reason(fake_gpu, monkeypatch):
    monkeypatch.setattr(fake_gpu, "gpu_access", lambda t: {
        "accessible": False, "umem": False, "reason": "XNACK is off"})
    with ut.zero_copy() as log:
        swallow_cpu_only_torch(lambda: torch.arange(4.0).to("cuda"))
    assert log.events == [("to", "copy", "the GPU cannot access it: XNACK is off")]


def test_every_spelling_of_a_move_is_aliased(fake_gpu):
    x = torch.arange(4.0)
    with ut.zero_copy() as log:
        results = [x.to("cuda"), x.to(torch.device("cuda", 0)), x.to("cuda", torch.float32),
                   x.to(device="cuda", non_blocking=True), x.cuda(), x.cuda(0)]
    assert all(r.data_ptr() == x.data_ptr() for r in results)
    assert [e[:2] for e in log.events] == [("to", "alias")] * 4 + [("cuda", "alias")] * 2
    assert [c[2] for c in fake_gpu.calls][:2] == [torch.device("cuda"), torch.device("cuda", 0)]
    assert len(fake_gpu.calls) == 6


def test_cpu_aliases_through_as_host_and_non_blocking_skips_the_synchronization(fake_gpu):
    g = torch.empty(4, device="meta")  # a non-CPU tensor that a CPU-only PyTorch can make
    with ut.zero_copy() as log:
        h = g.cpu()
        g.to("cpu", non_blocking=True)
    assert h.device.type == "cpu" and h.tolist() == [7.0] * 4
    assert [(c[0], c[2]) for c in fake_gpu.calls] == [("as_host", True), ("as_host", False)]
    assert log.events == [("cpu", "alias", "meta -> cpu"), ("to", "alias", "meta -> cpu")]


def test_strict_mode_raises_instead_of_copying(fake_gpu):
    x = torch.arange(12.0).view(3, 4).t()
    with ut.zero_copy(strict=True) as log:
        with pytest.raises(ut.UmemTorchError, match="non-contiguous"):
            x.to("cuda")
        with pytest.raises(ut.UmemTorchError, match="dtype change"):
            torch.arange(4.0).to("cuda", torch.float64)
        assert torch.arange(4.0).to("cuda").data_ptr() != 0  # aliases still work
    assert [e[1] for e in log.events] == ["copy", "copy", "alias"]


def test_no_method_of_torch_tensor_is_replaced():
    methods = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu)
    with ut.zero_copy():
        assert (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu) == methods
        assert all(a is b for a, b in zip((torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu),
                                          methods))
    assert all(a is b for a, b in zip((torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu),
                                      methods))


# --- modules and autograd -----------------------------------------------------------------------

@pytest.mark.parametrize("move", [lambda m: m.to("cuda"), lambda m: m.cuda(),
                                  lambda m: m.to(torch.device("cuda"), non_blocking=True)])
def test_moving_a_module_aliases_every_parameter_and_buffer(fake_gpu, move):
    torch.manual_seed(0)
    model = Net()
    before = {name: t.data_ptr() for name, t in tensors(model).items()}
    parameters = dict(model.named_parameters())
    assert all(p.requires_grad for p in parameters.values())
    with ut.zero_copy() as log:
        assert move(model) is model
    assert len(log.aliases) == 5 and log.copies == []
    assert len(fake_gpu.calls) == 5
    assert sorted(c[1].data_ptr() for c in fake_gpu.calls) == sorted(before.values())
    # The primitives get a detached tensor to own the memory: the parameter itself gets the
    # alias as its .data, so it would stop holding the original storage.
    assert all(type(c[1]) is torch.Tensor and c[1] is not p for c in fake_gpu.calls
               for p in parameters.values())
    assert {name: t.data_ptr() for name, t in tensors(model).items()} == before
    for name, p in model.named_parameters():
        assert p is parameters[name] and isinstance(p, nn.Parameter)
        assert p.is_leaf and p.requires_grad and p.grad_fn is None
    assert model.linear.weight.is_leaf


def test_training_after_the_move_changes_the_original_memory(fake_gpu):
    torch.manual_seed(0)
    model = Net()
    original = model.linear.weight.detach()  # the umem memory, as seen before the move
    start = original.clone()
    with ut.zero_copy():
        model.to("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(8, 4)).square().mean().backward()
    grad = model.linear.weight.grad.clone()
    optimizer.step()
    assert not torch.equal(original, start)
    assert torch.allclose(original, start - 0.5 * grad)


def test_grad_enabled_alias_of_a_tensor_requiring_grad_stays_in_the_graph(fake_gpu):
    x = torch.arange(4.0, requires_grad=True)
    weights = torch.tensor([1.0, -2.0, 3.0, 0.5])
    with ut.zero_copy() as log:
        y = x.to("cuda")
    assert log.events == [("to", "alias", "cpu -> cuda")]
    assert y.data_ptr() == x.data_ptr()
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    (y * weights).sum().backward()
    assert x.grad.tolist() == weights.tolist()


def test_backward_moves_the_gradient_back_to_the_source_device(fake_gpu, monkeypatch):
    # The alias lands on the meta device, so the gradient arrives there and backward has to send
    # it to the CPU source: through as_host, the fake's (its values are 7s).
    monkeypatch.setattr(fake_gpu, "as_device", lambda t, device=None: torch.empty_like(
        t, device="meta"))
    x = torch.arange(4.0, requires_grad=True)
    with ut.zero_copy():
        y = x.to("cuda")
    (y * torch.ones(4, device="meta")).sum().backward()
    assert [(c[0], c[1].device.type) for c in fake_gpu.calls] == [("as_host", "meta")]
    assert x.grad.device.type == "cpu" and x.grad.tolist() == [7.0] * 4


def test_under_no_grad_an_alias_is_a_plain_tensor(fake_gpu):
    x = torch.arange(4.0, requires_grad=True)
    with ut.zero_copy() as log, torch.no_grad():
        y = x.to("cuda")
    assert log.aliases and y.data_ptr() == x.data_ptr()
    assert not y.requires_grad and y.grad_fn is None


# --- threads and nesting ------------------------------------------------------------------------

def test_other_threads_run_pytorchs_own_methods_unlogged(fake_gpu):
    x = torch.arange(4.0)
    seen = {}

    def other():
        try:
            seen["cpu"] = x.cpu()
            seen["to"] = x.to(torch.float64)
            swallow_cpu_only_torch(lambda: x.to("cuda"))
        except Exception as e:  # reported below, with its type
            seen["error"] = e

    with ut.zero_copy() as log:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        y = x.to("cuda")  # this thread's mode is still in force
    assert "error" not in seen, repr(seen.get("error"))
    assert seen["cpu"] is x and seen["to"].dtype == torch.float64
    assert log.events == [("to", "alias", "cpu -> cuda")] and y.data_ptr() == x.data_ptr()
    assert [c[1].data_ptr() for c in fake_gpu.calls] == [x.data_ptr()]


def test_nested_blocks_each_log_what_happened_inside_them(fake_gpu):
    x = torch.arange(4.0)
    strided = torch.arange(12.0).view(3, 4).t()
    with ut.zero_copy() as outer:
        x.to("cuda")
        with ut.zero_copy(strict=True) as inner:
            x.cuda()
            with pytest.raises(ut.UmemTorchError):  # the innermost block's strict applies
                strided.to("cuda")
        with ut.zero_copy() as second:
            x.to(torch.float64)
        swallow_cpu_only_torch(lambda: strided.cuda())
    assert inner.events == [("cuda", "alias", "cpu -> cuda"),
                            ("to", "copy", "non-contiguous tensor")]
    assert second.events == [("to", "copy", "no device change")]
    assert outer.events == [("to", "alias", "cpu -> cuda")] + inner.events + second.events + [
        ("cuda", "copy", "non-contiguous tensor")]
    assert len(fake_gpu.calls) == 2  # one alias per aliasing call, never one per block


def test_inner_non_strict_block_copies_inside_a_strict_one(fake_gpu):
    strided = torch.arange(12.0).view(3, 4).t()
    with ut.zero_copy(strict=True) as outer:
        with ut.zero_copy() as inner:
            y = strided.to(torch.float64)
            swallow_cpu_only_torch(lambda: strided.to("cuda"))
    assert y.dtype == torch.float64 and torch.equal(y, strided.double())
    assert inner.events == outer.events == [("to", "copy", "no device change"),
                                            ("to", "copy", "non-contiguous tensor")]


def test_the_mode_is_a_torch_function_mode_importable_from_both_modules(package_dir):
    assert ut.zero_copy is zc.zero_copy and ut.ZeroCopyLog is zc.ZeroCopyLog
    assert issubclass(ut.zero_copy, torch.overrides.TorchFunctionMode)
    code = ("import umem.torch.zero_copy_mode, umem.torch; "
            "assert umem.torch.zero_copy is umem.torch.zero_copy_mode.zero_copy")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=package_dir))
    assert r.returncode == 0, r.stderr
