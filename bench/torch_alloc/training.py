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

The lent GPU machine runs a whole trial at full speed or slower (1.4-1.6 times, at times in
between), whatever the allocator. Each trial times a fixed CPU load after every step
(workloads.py), which tells the speeds apart; step_verdict.py keeps the full-speed trials, compares
the medians of their steps (each the median of the second half of a trial's steps) and judges the
ratio by its bootstrap interval over rounds: ok where the whole interval is at or below the
target, MISSED where it is above, inconclusive otherwise, and not judged where the control's
interval excludes 1.

Prints a markdown table per workload: rounds, trials kept, step times, the ratios umem / PyTorch
(judged against <= 1.02) and control / PyTorch with their intervals, umem / PyTorch with
expandable segments, allocations per step, driver allocations in the timed steps, peak reserved
bytes (umem's judged against PyTorch's with expandable segments) and whether all losses are
equal; then every trial's step and calibration.

    python3 bench/torch_alloc/training.py [--steps 60] [--rounds 10] [--log F]   # on a GPU machine
    python3 bench/torch_alloc/training.py --from-log F   # the table of a run cut short

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import json
import os
import signal
import sys
import traceback

# Set before torch is imported: torch.cuda.is_available() then asks NVML and leaves CUDA
# uninitialized, which the forked trials need.
os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import step_verdict as sv  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = ("gpt2", "llama", "resnet50")
# name: (workloads.run allocator, PyTorch allocator settings or None)
ALLOCATORS = {"torch": ("torch", None), "torch-expandable": ("torch", "expandable_segments:True"),
              "umem": ("umem", None), "control": ("torch", None)}
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


def rounds_of(trials, workload):
    """The workload's complete rounds, each {allocator: trial}, in order."""
    by_round = {}
    for t in trials:
        if t["workload"] == workload:
            by_round.setdefault(t["round"], {})[t["name"]] = t
    return [by_round[r] for r in sorted(by_round) if len(by_round[r]) == len(ALLOCATORS)]


def shown(x, ci):
    return "-" if x is None else f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def report(trials, workloads_run, steps):
    print("| workload | rounds | trials at full speed, PyTorch / expandable / umem / control | "
          "PyTorch step (ms) | PyTorch expandable step (ms) | umem step (ms) | "
          f"umem / PyTorch step [{sv.CONFIDENCE:.0%} interval] (<= {STEP_TARGET}) | "
          "control / PyTorch step | umem / expandable step | "
          "allocations per step | driver allocations in the timed steps, PyTorch / umem | "
          "PyTorch peak reserved (MB) | PyTorch expandable peak reserved (MB) | "
          "umem peak reserved (MB) | umem / expandable reserved (<= 1) | losses equal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    timed = steps - steps // 2
    for w in workloads_run:
        rounds = rounds_of(trials, w)
        fastest = sv.fastest_calibration(rounds)
        runs = {al: [r[al] for r in rounds] for al in ALLOCATORS}
        fast = " / ".join(str(len(sv.full_speed(runs[al], fastest))) for al in ALLOCATORS)
        step = {al: sv.step_ms(runs[al], fastest) for al in ALLOCATORS}
        ms = {al: "-" if step[al] is None else f"{step[al]:.2f}" for al in ALLOCATORS}
        ratio = {al: sv.ratio(rounds, al, "torch", fastest) for al in ("umem", "control")}
        ci = {al: sv.interval(rounds, al, "torch") for al in ("umem", "control")}
        vs_expandable = sv.ratio(rounds, "umem", "torch-expandable", fastest)
        reserved = {al: max(x["peak_reserved_bytes"] for x in runs[al]) for al in ALLOCATORS}
        losses = {tuple(x["losses"]) for al in ALLOCATORS for x in runs[al]}
        first = {al: runs[al][0] for al in ALLOCATORS}
        allocations = first["torch"].get("timed.allocation.all.allocated")
        driver = " / ".join(str(first[al].get("timed.segment.all.allocated", "-"))
                            for al in ("torch", "umem"))
        reserved_ratio = reserved["umem"] / reserved["torch-expandable"]
        print(f"| {w} | {len(rounds)} | {fast} | {ms['torch']} | {ms['torch-expandable']} | "
              f"{ms['umem']} | {shown(ratio['umem'], ci['umem'])} "
              f"{sv.verdict(ci['umem'], ci['control'], STEP_TARGET)} | "
              f"{shown(ratio['control'], ci['control'])} | {shown(vs_expandable, None)} | "
              f"{f'{allocations / timed:.0f}' if allocations is not None else '-'} | {driver} | "
              f"{reserved['torch'] / 1e6:.0f} | {reserved['torch-expandable'] / 1e6:.0f} | "
              f"{reserved['umem'] / 1e6:.0f} | "
              f"{reserved_ratio:.3f} {'ok' if reserved_ratio <= 1 else 'MISSED'} | "
              f"{'yes' if len(losses) == 1 else 'NO'} |")
    umem_first = {w: rounds_of(trials, w)[0]["umem"] for w in workloads_run}
    print(f"\nsteps {steps} (median of the last {timed}); umem params in umem memory: " +
          ", ".join(f"{w} {x.get('umem_params_on_umem')}/{x.get('params')}"
                    for w, x in umem_first.items()))
    print("step / calibration of every trial in ms, round by round (* below full speed):")
    for w in workloads_run:
        rounds = rounds_of(trials, w)
        fastest = sv.fastest_calibration(rounds)
        for al in ALLOCATORS:
            print(f"- {w} {al}: " + ", ".join(
                f"{r[al]['median_step_ms']:.2f}/{r[al]['median_calibration_ms']:.2f}"
                f"{'' if sv.full_speed([r[al]], fastest) else '*'}" for r in rounds))
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
        a.workloads = [w for w in a.workloads if rounds_of(trials, w)]
        if not a.workloads:
            sys.exit(f"{a.from_log}: no workload has a round with a trial of every allocator")
        report(trials, a.workloads, len(trials[0]["losses"]))
        return
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # each trial sets its own
    preload()
    names = list(ALLOCATORS)
    trials = []
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for w in a.workloads:
            for al in order:
                trials.append(dict(train(w, al, a.steps), round=r, name=al))
                if a.log:
                    with open(a.log, "a") as f:
                        f.write(json.dumps(trials[-1]) + "\n")
    report(trials, a.workloads, a.steps)


if __name__ == "__main__":
    main()
