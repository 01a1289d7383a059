"""Real training with umem against PyTorch's allocator, default and with expandable segments, on
one GPU in one run: each workload of workloads.py (transformers GPT-2 and Llama, torchvision
ResNet-50) trains STEPS steps once per allocator per round, with the same seeds and deterministic
algorithms, for ROUNDS rounds, the order rotating from round to round. A second trial of PyTorch's
default allocator ("control") runs in every round: what the method reads between two equal
trials.

Every trial is a process of its own, forked from this one after it imported torch, transformers
and torchvision without touching the GPU: the child initializes CUDA and its allocator (umem's
enable(), or PyTorch's allocator settings) itself, so a trial costs seconds rather than an
interpreter start, and many rounds fit.

The lent GPU machine runs a whole trial either at full speed or 1.4-1.6 times slower, at random
(measured: a GPT-2 step 12.7-14.3 or 17-22.4 ms, whatever the allocator). Each trial times a
fixed CPU load after every step (workloads.py), which reads about 1.1 or 1.5-1.7 ms in the two
modes; trials whose calibration is more than SLOW_MODE times the workload's fastest are left
out, and each allocator's step time is the median over its remaining trials of their median
steps (the second half of the steps).

Prints a markdown table per workload: trials kept, step times, the ratios umem / PyTorch (judged
against <= 1.02, only where the control reads within 2 % of PyTorch) and control / PyTorch,
allocations per step, driver allocations in the timed steps, peak reserved bytes (umem's judged
against PyTorch's with expandable segments) and whether all losses are equal; then every trial's
step and calibration.

    python3 bench/torch_alloc/training.py [--steps 60] [--rounds 10] [--log F]   # on a GPU machine
    python3 bench/torch_alloc/training.py --from-log F   # the table of a run cut short

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import json
import os
import signal
import statistics
import sys
import traceback

# Set before torch is imported: torch.cuda.is_available() then asks NVML and leaves CUDA
# uninitialized, which the forked trials need.
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import workloads  # noqa: E402

WORKLOADS = ("gpt2", "llama", "resnet50")
# name: (workloads.run allocator, PyTorch allocator settings or None)
ALLOCATORS = {"torch": ("torch", None), "torch-expandable": ("torch", "expandable_segments:True"),
              "umem": ("umem", None), "control": ("torch", None)}
STEP_TARGET = 1.02
SLOW_MODE = 1.25  # a calibration this much slower than the fastest: the machine's slow mode
TRIAL_TIMEOUT_S = 600


def preload():
    """What every trial imports, imported once here; none of it touches the GPU."""
    import torch
    import torchvision  # noqa: F401
    import transformers  # noqa: F401
    from transformers import GPT2LMHeadModel, LlamaForCausalLM  # noqa: F401
    import umem.torch  # noqa: F401
    if torch.cuda.is_initialized():
        sys.exit("training.py: importing the workloads initialized CUDA; trials cannot be forked")


def child(workload, allocator, steps):
    import torch
    which, settings = ALLOCATORS[allocator]
    if settings:
        torch.cuda.memory._set_allocator_settings(settings)
    return workloads.run(workload, which, None, steps)


def train(workload, allocator, steps):
    """One trial in a forked child: its workloads.run result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        signal.alarm(TRIAL_TIMEOUT_S)
        try:
            out = {"ok": child(workload, allocator, steps)}
        except BaseException:  # noqa: B036 (reported to the parent, whatever it was)
            out = {"error": traceback.format_exc()}
        with os.fdopen(write_end, "w") as f:
            f.write(json.dumps(out))
        os._exit(0)  # no atexit handlers of the parent's interpreter
    os.close(write_end)
    with os.fdopen(read_end) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        sys.exit(f"{allocator} {workload}: the trial died (wait status {status})")
    out = json.loads(text)
    if "error" in out:
        sys.exit(f"{allocator} {workload} failed:\n{out['error']}")
    return out["ok"]


def judged(ratio, control):
    if abs(control - 1) > STEP_TARGET - 1:
        return "not judged"
    return "ok" if ratio <= STEP_TARGET else "MISSED"


def full_speed(trials, fastest):
    """The trials whose calibration ran at the machine's full speed (within SLOW_MODE of the
    fastest calibration of the workload): the lent machine runs a trial either at full speed or
    about 1.4-1.6 times slower throughout, and the calibration tells which."""
    return [x for x in trials if x["median_calibration_ms"] <= SLOW_MODE * fastest]


def report(runs, workloads_run, steps, rounds):
    print("| workload | trials at full speed, PyTorch / expandable / umem / control | "
          "PyTorch step (ms) | PyTorch expandable step (ms) | umem step (ms) | "
          f"umem / PyTorch step (<= {STEP_TARGET}) | control / PyTorch step | "
          "allocations per step | driver allocations in the timed steps, PyTorch / umem | "
          "PyTorch peak reserved (MB) | PyTorch expandable peak reserved (MB) | "
          "umem peak reserved (MB) | umem / expandable reserved (<= 1) | losses equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    timed = steps - steps // 2
    for w in workloads_run:
        fastest = min(x["median_calibration_ms"] for al in ALLOCATORS for x in runs[(w, al)])
        fast = {al: full_speed(runs[(w, al)], fastest) for al in ALLOCATORS}
        if not all(fast.values()):
            print(f"| {w} | " + " / ".join(str(len(fast[al])) for al in ALLOCATORS) +
                  " | (an allocator has no trial at full speed: run more rounds) |")
            continue
        step = {al: statistics.median(x["median_step_ms"] for x in fast[al]) for al in ALLOCATORS}
        ratio = {al: step[al] / step["torch"] for al in ALLOCATORS}
        reserved = {al: max(x["peak_reserved_bytes"] for x in runs[(w, al)]) for al in ALLOCATORS}
        losses = {tuple(x["losses"]) for al in ALLOCATORS for x in runs[(w, al)]}
        first = {al: runs[(w, al)][0] for al in ALLOCATORS}
        allocations = first["torch"].get("timed.allocation.all.allocated")
        driver = " / ".join(str(first[al].get("timed.segment.all.allocated", "-"))
                            for al in ("torch", "umem"))
        reserved_ratio = reserved["umem"] / reserved["torch-expandable"]
        print(f"| {w} | " + " / ".join(str(len(fast[al])) for al in ALLOCATORS) +
              f" | {step['torch']:.2f} | {step['torch-expandable']:.2f} | {step['umem']:.2f} | "
              f"{ratio['umem']:.3f} {judged(ratio['umem'], ratio['control'])} | "
              f"{ratio['control']:.3f} | "
              f"{f'{allocations / timed:.0f}' if allocations is not None else '-'} | {driver} | "
              f"{reserved['torch'] / 1e6:.0f} | {reserved['torch-expandable'] / 1e6:.0f} | "
              f"{reserved['umem'] / 1e6:.0f} | "
              f"{reserved_ratio:.3f} {'ok' if reserved_ratio <= 1 else 'MISSED'} | "
              f"{'yes' if len(losses) == 1 else 'NO'} |")
    print(f"\nsteps {steps} (median of the last {timed}), rounds {rounds}; umem params in umem "
          "memory: " + ", ".join(f"{w} {runs[(w, 'umem')][0].get('umem_params_on_umem')}/"
                                 f"{runs[(w, 'umem')][0].get('params')}" for w in workloads_run))
    print("step / calibration of every trial in ms, round by round (* below full speed):")
    for w in workloads_run:
        fastest = min(x["median_calibration_ms"] for al in ALLOCATORS for x in runs[(w, al)])
        for al in ALLOCATORS:
            print(f"- {w} {al}: " + ", ".join(
                f"{x['median_step_ms']:.2f}/{x['median_calibration_ms']:.2f}"
                f"{'' if x['median_calibration_ms'] <= SLOW_MODE * fastest else '*'}"
                for x in runs[(w, al)]))
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    p.add_argument("--log", help="append each trial's JSON line to this file as it ends")
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
            sys.exit(f"{a.from_log}: no workload has a trial of every allocator")
        a.rounds = min(len(runs[(w, al)]) for w in a.workloads for al in ALLOCATORS)
        a.steps = len(runs[(a.workloads[0], "torch")][0]["losses"])
        report({k: v[:a.rounds] for k, v in runs.items()}, a.workloads, a.steps, a.rounds)
        return
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # each trial sets its own
    preload()
    names = list(ALLOCATORS)
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for w in a.workloads:
            for al in order:
                runs[(w, al)].append(train(w, al, a.steps))
                if a.log:
                    with open(a.log, "a") as f:
                        f.write(json.dumps(dict(runs[(w, al)][-1], round=r, name=al)) + "\n")
    report(runs, a.workloads, a.steps, a.rounds)


if __name__ == "__main__":
    main()
