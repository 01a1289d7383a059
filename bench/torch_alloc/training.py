"""Real training with umem against PyTorch's allocator, default and with expandable segments, on
one GPU in one run: each workload of workloads.py (transformers GPT-2 and Llama, torchvision
ResNet-50) trains STEPS steps once per allocator, each in a process of its own with the same
seeds and deterministic algorithms, for ROUNDS rounds, the order of the processes rotating from
round to round. A second process of PyTorch's default allocator ("control") runs in every round:
its ratio to the first is what the method reads between two equal processes.

Prints a markdown table: per allocator the median over rounds of each process's median step time
(second half of the steps) and of its median calibrated step (a step divided by the fixed CPU
load timed right after it in the same process, workloads.py: the lent machine's CPU speed changes
between processes), peak reserved bytes, whether the losses are equal, and umem's ratios with the
targets (step time umem / PyTorch's default <= 1.02, judged on calibrated steps, and only where
the control reads within the target of 1; peak reserved <= PyTorch's with expandable segments).
Then each round's calibrated ratios.

    python3 bench/torch_alloc/training.py [--steps 100] [--rounds 3] [--log F]   # on a GPU machine
    python3 bench/torch_alloc/training.py --from-log F   # the table of a run cut short

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
              "umem": ("umem", None), "control": ("torch", None)}
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


def judged(ratio, control):
    if abs(control - 1) > STEP_TARGET - 1:
        return "not judged"
    return "ok" if ratio <= STEP_TARGET else "MISSED"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    p.add_argument("--log", help="append each process's JSON line to this file as it ends")
    p.add_argument("--from-log", help="print the table of a --log file's complete rounds (of a "
                   "run cut short) instead of training")
    a = p.parse_args()
    runs = {(w, al): [] for w in a.workloads for al in ALLOCATORS}
    if a.from_log:
        with open(a.from_log) as f:
            for line in f:
                x = json.loads(line)
                runs.setdefault((x["workload"], x["name"]), []).append(x)
        a.workloads = [w for w in a.workloads if all(runs.get((w, al)) for al in ALLOCATORS)]
        if not a.workloads:
            sys.exit(f"{a.from_log}: no workload has a process of every allocator")
        a.rounds = min(len(runs[(w, al)]) for w in a.workloads for al in ALLOCATORS)
        a.steps = len(runs[(a.workloads[0], "torch")][0]["losses"])
        runs = {k: v[:a.rounds] for k, v in runs.items()}
    names = list(ALLOCATORS)
    for r in range(0 if a.from_log else a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for w in a.workloads:
            for al in order:
                runs[(w, al)].append(train(w, al, a.steps))
                if a.log:
                    with open(a.log, "a") as f:
                        f.write(json.dumps(dict(runs[(w, al)][-1], round=r, name=al)) + "\n")

    def median(w, al, key):
        return statistics.median(x[key] for x in runs[(w, al)])

    def ratio(w, al, i=None):
        pick = (lambda x: [x[i]]) if i is not None else (lambda x: x)
        mine = statistics.median(x["median_calibrated_step"] for x in pick(runs[(w, al)]))
        base = statistics.median(x["median_calibrated_step"] for x in pick(runs[(w, "torch")]))
        return mine / base
    print("| workload | PyTorch step (ms) | PyTorch expandable step (ms) | umem step (ms) | "
          "umem / PyTorch step | control / PyTorch step | "
          f"umem / PyTorch calibrated step (<= {STEP_TARGET}) | "
          "control / PyTorch calibrated step | "
          "PyTorch peak reserved (MB) | PyTorch expandable peak reserved (MB) | "
          "umem peak reserved (MB) | umem / expandable reserved (<= 1) | losses equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in a.workloads:
        step = {al: median(w, al, "median_step_ms") for al in ALLOCATORS}
        reserved = {al: max(x["peak_reserved_bytes"] for x in runs[(w, al)]) for al in ALLOCATORS}
        losses = {tuple(x["losses"]) for al in ALLOCATORS for x in runs[(w, al)]}
        calibrated, control = ratio(w, "umem"), ratio(w, "control")
        reserved_ratio = reserved["umem"] / reserved["torch-expandable"]
        print(f"| {w} | {step['torch']:.2f} | {step['torch-expandable']:.2f} | {step['umem']:.2f} | "
              f"{step['umem'] / step['torch']:.3f} | {step['control'] / step['torch']:.3f} | "
              f"{calibrated:.3f} {judged(calibrated, control)} | {control:.3f} | "
              f"{reserved['torch'] / 1e6:.0f} | {reserved['torch-expandable'] / 1e6:.0f} | "
              f"{reserved['umem'] / 1e6:.0f} | "
              f"{reserved_ratio:.3f} {'ok' if reserved_ratio <= 1 else 'MISSED'} | "
              f"{'yes' if len(losses) == 1 else 'NO'} |")
    print(f"\nsteps {a.steps} (median of the last {a.steps - a.steps // 2}), rounds {a.rounds}; "
          "umem params in umem memory: " +
          ", ".join(f"{w} {runs[(w, 'umem')][0].get('umem_params_on_umem')}/"
                    f"{runs[(w, 'umem')][0].get('params')}" for w in a.workloads))
    print("calibrated ratios per round (umem / PyTorch, control / PyTorch, "
          "expandable / PyTorch): " +
          "; ".join(f"{w} " + ", ".join(
              f"{ratio(w, 'umem', i):.3f} {ratio(w, 'control', i):.3f} "
              f"{ratio(w, 'torch-expandable', i):.3f}" for i in range(a.rounds))
              for w in a.workloads))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
