"""Real models trained on the GPU with fixed seeds, for comparing allocators: a transformers GPT-2
and a Llama-architecture model (random init, small) and a torchvision ResNet-50. Run as a script
it prints one JSON line: the losses, the median step time, the median calibration (below) and
PyTorch's peak memory statistics.

    python3 bench/torch_alloc/workloads.py gpt2 --allocator umem [--compile default|reduce-overhead]

--allocator umem calls umem.torch.enable() (default configuration) before anything touches the
GPU; torch keeps PyTorch's own allocator (configured by PYTORCH_CUDA_ALLOC_CONF, as always). The model is built on the CPU and moved with .to(),
as users do. Deterministic algorithms are on, so equal allocators' losses are equal.

The lent GPU machine's CPU speed changes by up to 1.6 times from one second to the next, while
allocators differ by a few percent. So after every step the process times a fixed load of the
same kind, CALIBRATION_LAUNCHES launches of an out= add that allocates nothing, and reports every
step's time and the median calibration, which shows how fast the machine ran (training.py
compares steps in lockstep)."""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
CALIBRATION_LAUNCHES = 200
COUNTED = ("allocation.all.allocated", "segment.all.allocated", "segment.all.freed",
           "num_device_alloc", "num_device_free", "num_alloc_retries")


def build(name):
    import torch
    torch.manual_seed(0)
    if name in ("gpt2", "llama"):
        if name == "gpt2":
            from transformers import GPT2Config, GPT2LMHeadModel
            model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_head=4, n_embd=256, vocab_size=8192,
                                               n_positions=256, attn_implementation="eager"))
        else:
            from transformers import LlamaConfig, LlamaForCausalLM
            model = LlamaForCausalLM(LlamaConfig(
                hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=8192,
                max_position_embeddings=256, attn_implementation="eager"))
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 8192, (8, 256), generator=gen)
        batch = {"input_ids": ids, "labels": ids}

        def loss_of(m, b):
            return m(**b).loss
        opt = lambda params: torch.optim.AdamW(params, lr=1e-3)  # noqa: E731
    else:
        import torchvision
        model = torchvision.models.resnet50(num_classes=100)
        gen = torch.Generator().manual_seed(1)
        batch = {"x": torch.randn(16, 3, 128, 128, generator=gen),
                 "y": torch.randint(0, 100, (16,), generator=gen)}

        def loss_of(m, b):
            return torch.nn.functional.cross_entropy(m(b["x"]), b["y"])
        opt = lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9)  # noqa: E731
    return model, batch, loss_of, opt


def run(name, allocator, compile_mode, steps, turn=None):
    """turn (training.py's lockstep): turn.wait() before every step, turn.done() after it and its
    calibration, so that another process's steps can run in between."""
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable()
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    model, batch, loss_of, make_opt = build(name)
    model = model.to("cuda")
    batch = {k: v.to("cuda") for k, v in batch.items()}
    optimizer = make_opt(model.parameters())
    step_model = torch.compile(model, mode=compile_mode) if compile_mode else model
    x = torch.ones(256, device="cuda")
    y = torch.empty_like(x)

    def calibration():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALIBRATION_LAUNCHES):
            torch.add(x, x, out=y)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    losses, times, calibrations = [], [], []
    before = {}
    for i in range(steps):
        if i == steps // 2:
            before = torch.cuda.memory_stats()
        if turn:
            turn.wait()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_of(step_model, batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        calibrations.append(calibration())
        if turn:
            turn.done()
    stats = torch.cuda.memory_stats()
    timed = slice(len(times) // 2, None)
    out = {"workload": name, "allocator": allocator, "compile": compile_mode, "losses": losses,
           "step_ms": [1000 * t for t in times],
           "median_step_ms": 1000 * statistics.median(times[timed]),
           "median_calibration_ms": 1000 * statistics.median(calibrations[timed]),
           "peak_allocated_bytes": stats.get("allocated_bytes.all.peak"),
           "peak_reserved_bytes": stats.get("reserved_bytes.all.peak"),
           "num_ooms": stats.get("num_ooms")}
    # What the timed steps asked of the allocator and it of the driver (None: not counted).
    for key in COUNTED:
        if key in stats and key in before:
            out["timed." + key] = stats[key] - before[key]
    if allocator == "umem":
        import umem.torch as ut
        out["umem_mode"] = ut.mode()
        out["umem_params_on_umem"] = sum(ut.gpu_access(p)["umem"] for p in model.parameters())
        out["params"] = sum(1 for _ in model.parameters())
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workload", choices=["gpt2", "llama", "resnet50"])
    p.add_argument("--allocator", choices=["torch", "umem"], default="umem")
    p.add_argument("--compile", dest="compile_mode", choices=["default", "reduce-overhead"])
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    print(json.dumps(run(a.workload, a.allocator, a.compile_mode, a.steps)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
