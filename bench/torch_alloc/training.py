"""Real training with umem against PyTorch's allocator, default and with expandable segments, on
one GPU in one run: each workload of workloads.py (transformers GPT-2 and Llama, torchvision
ResNet-50) trains STEPS steps once per allocator, each in a process of its own with the same
seeds and deterministic algorithms, the three alternating for ROUNDS rounds (CPU clocks drift
between processes). Prints a markdown table: the median over rounds of each process's median
step time (second half of the steps), peak reserved bytes, whether the losses are equal, and
umem's ratios with the targets (step time umem / PyTorch's default <= 1.02; peak reserved
<= PyTorch's with expandable segments).

    python3 bench/torch_alloc/training.py [--steps 30] [--rounds 2]   # on a GPU machine

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = ("gpt2", "llama", "resnet50")
# name: (workloads.py --allocator, PYTORCH_CUDA_ALLOC_CONF or None)
ALLOCATORS = {"torch": ("torch", None), "torch-expandable": ("torch", "expandable_segments:True"),
              "umem": ("umem", None)}
STEP_TARGET = 1.02


def train(workload, allocator, steps):
    which, conf = ALLOCATORS[allocator]
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    cmd = [sys.executable, os.path.join(HERE, "workloads.py"), workload, "--allocator", which,
           "--steps", str(steps)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if r.returncode != 0:
        sys.exit(f"{allocator} {workload} failed:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    a = p.parse_args()
    runs = {(w, al): [] for w in a.workloads for al in ALLOCATORS}
    for _ in range(a.rounds):
        for w in a.workloads:
            for al in ALLOCATORS:
                runs[(w, al)].append(train(w, al, a.steps))
    print("| workload | PyTorch step (ms) | PyTorch expandable step (ms) | umem step (ms) | "
          f"umem / PyTorch step (<= {STEP_TARGET}) | PyTorch peak reserved (MB) | "
          "PyTorch expandable peak reserved (MB) | umem peak reserved (MB) | "
          "umem / expandable reserved (<= 1) | losses equal |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for w in a.workloads:
        step = {al: statistics.median(r["median_step_ms"] for r in runs[(w, al)])
                for al in ALLOCATORS}
        reserved = {al: max(r["peak_reserved_bytes"] for r in runs[(w, al)]) for al in ALLOCATORS}
        losses = {tuple(r["losses"]) for al in ALLOCATORS for r in runs[(w, al)]}
        step_ratio = step["umem"] / step["torch"]
        reserved_ratio = reserved["umem"] / reserved["torch-expandable"]
        print(f"| {w} | {step['torch']:.2f} | {step['torch-expandable']:.2f} | {step['umem']:.2f} | "
              f"{step_ratio:.3f} {'ok' if step_ratio <= STEP_TARGET else 'MISSED'} | "
              f"{reserved['torch'] / 1e6:.0f} | {reserved['torch-expandable'] / 1e6:.0f} | "
              f"{reserved['umem'] / 1e6:.0f} | "
              f"{reserved_ratio:.3f} {'ok' if reserved_ratio <= 1 else 'MISSED'} | "
              f"{'yes' if len(losses) == 1 else 'NO'} |")
    print(f"\nsteps {a.steps} (median of the last {a.steps - a.steps // 2}), rounds {a.rounds}; "
          "umem params in umem memory: " +
          ", ".join(f"{w} {runs[(w, 'umem')][0].get('umem_params_on_umem')}/"
                    f"{runs[(w, 'umem')][0].get('params')}" for w in a.workloads))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
