"""Run by test_cpu_allocator_models.py in a fresh process: a few training steps of real models
on the CPU, one after the other, with umem as PyTorch's CPU allocator or PyTorch's own. Prints
one JSON line, by model. argv: package folder, "umem" or "pytorch", model names."""
import json
import signal
import sys

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402
import umem.torch as ut  # noqa: E402

mode, names = sys.argv[2], sys.argv[3:]
signal.alarm(240)  # a hang ends the process instead of the test run
if mode == "umem":
    ut.enable_host()
torch.set_num_threads(2)  # intra-op kernels allocate from two threads at once


def build(name):
    """The model, a batch and a loss function (the models as their libraries define them)."""
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        x = torch.randn(4, 3, 32, 32)
        return model, x, lambda out: torch.nn.functional.cross_entropy(out, torch.arange(4))
    if name == "transformer":
        model = torch.nn.Transformer(d_model=64, nhead=4, num_encoder_layers=2,
                                     num_decoder_layers=2, dim_feedforward=128, dropout=0.1,
                                     batch_first=True)
        src, tgt = torch.randn(4, 16, 64), torch.randn(4, 12, 64)
        return (lambda m: (m, (src, tgt), lambda out: out.pow(2).mean()))(model)
    if name == "lstm":
        model = torch.nn.LSTM(input_size=32, hidden_size=64, num_layers=2, batch_first=True)
        x = torch.randn(8, 20, 32)
        return model, x, lambda out: out[0].sum()
    raise SystemExit(f"unknown model {name}")


def train(name):
    if mode == "umem":
        ut.reset_peak_memory_stats("cpu")
        allocations_before = ut.memory_stats("cpu")["allocation.all.allocated"]
    torch.manual_seed(0)
    model, batch, loss_of = build(name)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        out = model(*batch) if isinstance(batch, tuple) else model(batch)
        loss = loss_of(out)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    state = [t for p in model.parameters()
             for t in (p, p.grad, optimizer.state[p]["momentum_buffer"])]
    result = {"losses": [repr(v) for v in losses],
              "checksum": repr(sum(float(p.double().sum()) for p in model.parameters())),
              "tensors": len(state)}
    if mode == "umem":
        result["not_umem"] = sum(not ut.gpu_access(t)["umem"] for t in state)
        stats = ut.memory_stats("cpu")
        result["allocations"] = stats["allocation.all.allocated"] - allocations_before
        result["live_bytes"] = stats["allocated_bytes.all.current"]
        result["peak_bytes"] = stats["allocated_bytes.all.peak"]
        result["state_bytes"] = sum(t.numel() * t.element_size() for t in state)
    return result


print(json.dumps({name: train(name) for name in names}))
