"""Real training with umem against PyTorch's allocator, default and with expandable segments, on
one GPU in one run: each workload of workloads.py (transformers GPT-2 and Llama, torchvision
ResNet-50) trains STEPS steps per trial, with the same seeds and deterministic algorithms.

Step times are compared in lockstep (step_verdict.py says why): per round and workload, a umem
trial and a trial of PyTorch's default allocator train side by side, taking turns step by step,
and so do two trials of PyTorch's default (the "control": what the method reads between equal
allocators), for ROUNDS rounds; which pair and which side of a pair goes first alternates from
round to round. A pair's ratio is the median of its per-step ratios; the rounds' ratios are judged
by their bootstrap interval, widened on both sides by the control's margin (how far from 1 the
control's interval reaches): ok where all of it is at or below 1.02, MISSED where all of it is
above, inconclusive otherwise. PyTorch with expandable segments trains once per workload, before
the rounds, for the peak it reserves.

Every trial is a process of its own, forked from this one after it imported torch, transformers
and torchvision without touching the GPU: the child initializes CUDA and its allocator (umem's
enable(), or PyTorch's allocator settings) itself, so a trial costs seconds rather than an
interpreter start, and many rounds fit.

Prints a markdown table per workload: rounds, median step times, the ratios umem / PyTorch
(judged) and control / PyTorch with their intervals, allocations per step, driver allocations in
the timed steps, peak reserved bytes (umem's judged against PyTorch's with expandable segments)
and whether all losses are equal; then every pair's ratio, steps and calibrations (workloads.py:
a fixed CPU load timed after every step, which shows how fast the machine ran).

    python3 bench/torch_alloc/training.py [--steps 60] [--rounds 10] [--log F]   # on a GPU machine
    python3 bench/torch_alloc/training.py --from-log F   # the table of a run cut short

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import json
import os
import statistics
import sys

# Set before torch is imported: torch.cuda.is_available() then asks NVML and leaves CUDA
# uninitialized, which the forked trials need.
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lockstep  # noqa: E402
import step_verdict as sv  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = ("gpt2", "llama", "resnet50")
# name: (workloads.run allocator, PyTorch allocator settings or None)
ALLOCATORS = {"torch": ("torch", None), "torch-expandable": ("torch", "expandable_segments:True"),
              "umem": ("umem", None)}
# pair: (measured allocator, anchor allocator), trained in lockstep once per round
PAIRS = {"umem": ("umem", "torch"), "control": ("torch", "torch")}
STEP_TARGET = 1.02
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


def child(workload, allocator, steps, turn):
    import torch
    which, settings = ALLOCATORS[allocator]
    if settings:
        torch.cuda.memory._set_allocator_settings(settings)
    return workloads.run(workload, which, None, steps, turn)


def train(workload, allocators, steps):
    """Trains `allocators` (one, or two in lockstep: step by step in turn, the first one first),
    each in a forked child; their workloads.run results."""
    return lockstep.run([lambda turn, al=al: child(workload, al, steps, turn) for al in allocators],
                        [f"{al} {workload}" for al in allocators], steps, TRIAL_TIMEOUT_S)


def rounds_of(trials, workload):
    """The workload's complete rounds, each {pair: (measured trial, anchor trial)}, in order."""
    return lockstep.complete_rounds(
        [t for t in trials if t["workload"] == workload and t.get("pair")], PAIRS)


def report(trials, workloads_run, steps):
    print("| workload | rounds | PyTorch step (ms) | PyTorch expandable step (ms, one trial) | "
          "umem step (ms) | "
          f"umem / PyTorch step in lockstep [{sv.CONFIDENCE:.0%} interval] (<= {STEP_TARGET}) | "
          "control / PyTorch step in lockstep | allocations per step | "
          "driver allocations in the timed steps, PyTorch / umem | "
          "PyTorch peak reserved (MB) | PyTorch expandable peak reserved (MB) | "
          "umem peak reserved (MB) | umem / expandable reserved (<= 1) | losses equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    timed = steps - steps // 2
    rounds = {w: rounds_of(trials, w) for w in workloads_run}
    ratios = {w: {p: sv.round_ratios(rounds[w], p) for p in PAIRS} for w in workloads_run}
    for w in workloads_run:
        ci = {p: sv.interval(ratios[w][p]) for p in PAIRS}
        # The trials of the complete rounds (a round cut short is in none of the columns), and
        # the one with expandable segments.
        in_rounds = [t for r in rounds[w] for pair in r.values() for t in pair]
        expandable = [t for t in trials if t["workload"] == w and t["name"] == "torch-expandable"]
        runs = {al: [t for t in in_rounds + expandable if t["name"] == al] for al in ALLOCATORS}
        step = {al: statistics.median(x["median_step_ms"] for x in runs[al]) for al in ALLOCATORS}
        reserved = {al: max(x["peak_reserved_bytes"] for x in runs[al]) for al in ALLOCATORS}
        losses = {tuple(x["losses"]) for al in ALLOCATORS for x in runs[al]}
        first = {al: runs[al][0] for al in ALLOCATORS}
        allocations = first["torch"].get("timed.allocation.all.allocated")
        driver = " / ".join(str(first[al].get("timed.segment.all.allocated", "-"))
                            for al in ("torch", "umem"))
        reserved_ratio = reserved["umem"] / reserved["torch-expandable"]
        print(f"| {w} | {len(rounds[w])} | {step['torch']:.2f} | {step['torch-expandable']:.2f} | "
              f"{step['umem']:.2f} | {sv.shown(statistics.median(ratios[w]['umem']), ci['umem'])} "
              f"{sv.verdict(ci['umem'], ci['control'], STEP_TARGET)} | "
              f"{sv.shown(statistics.median(ratios[w]['control']), ci['control'])}, margin "
              f"{sv.margin(ci['control']):.3f} | "
              f"{f'{allocations / timed:.0f}' if allocations is not None else '-'} | {driver} | "
              f"{reserved['torch'] / 1e6:.0f} | {reserved['torch-expandable'] / 1e6:.0f} | "
              f"{reserved['umem'] / 1e6:.0f} | "
              f"{reserved_ratio:.3f} {'ok' if reserved_ratio <= 1 else 'MISSED'} | "
              f"{'yes' if len(losses) == 1 else 'NO'} |")
    umem_first = {w: rounds[w][0]["umem"][0] for w in workloads_run}
    print(f"\nsteps {steps} (ratios over the last {timed}); umem params in umem memory: " +
          ", ".join(f"{w} {x.get('umem_params_on_umem')}/{x.get('params')}"
                    for w, x in umem_first.items()))
    print("per round: the pair's ratio (median steps in ms, median calibrations in ms):")
    for w in workloads_run:
        for p in PAIRS:
            print(f"- {w} {p}: " + ", ".join(
                f"{x:.3f} ({a['median_step_ms']:.2f}/{b['median_step_ms']:.2f}, "
                f"{a['median_calibration_ms']:.2f}/{b['median_calibration_ms']:.2f})"
                for x, (a, b) in zip(ratios[w][p], (r[p] for r in rounds[w]))))
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
    if a.from_log:
        with open(a.from_log) as f:
            trials = [json.loads(line) for line in f]
        names = {(t["workload"], t["name"]) for t in trials}
        a.workloads = [w for w in a.workloads
                       if rounds_of(trials, w) and (w, "torch-expandable") in names]
        if not a.workloads:
            sys.exit(f"{a.from_log}: no workload has a complete round and its expandable trial")
        report(trials, a.workloads, len(trials[0]["losses"]))
        return
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # each trial sets its own
    preload()
    trials = []

    def log(new):
        trials.extend(new)
        if a.log:
            with open(a.log, "a") as f:
                f.writelines(json.dumps(t) + "\n" for t in new)
    for w in a.workloads:  # expandable segments: once, for the peak it reserves
        (t,) = train(w, ["torch-expandable"], a.steps)
        log([dict(t, workload=w, name="torch-expandable", round=0)])
    for r in range(a.rounds):
        for w in a.workloads:
            for p, sides in lockstep.order(r, PAIRS):
                out = train(w, [al for _, al in sides], a.steps)
                log([dict(t, workload=w, name=al, round=r, pair=p, side=side)
                     for t, (side, al) in zip(out, sides)])
    report(trials, a.workloads, a.steps)


if __name__ == "__main__":
    main()
