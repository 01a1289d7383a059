"""umem as PyTorch's CPU allocator (umem.torch.enable_host()) against PyTorch's own
DefaultCPUAllocator (posix_memalign/free through glibc). Each process proves which allocator serves
its CPU tensors (umem_torch_owns) before it measures. Prints a header line with the machine's facts
and three markdown tables (parts 1-3 below), with umem's ratio = PyTorch's time / umem's time
(>= 1: umem is no slower). Method and reasons: docs/method/cpu-allocator-benchmarks.md.

Part 1, alloc+free on the CPU, ns per alloc+free, for SIZES, 1 and 2 threads, in ROUNDS processes
where umem is enabled, each alternating PAIRS pairs of timed loops between the two allocators: the
benchmark's extension switches c10's CPU allocator between PyTorch's DefaultCPUAllocator and umem's
(c10::SetCPUAllocator at priority 255, above both), so that both contenders meet the same process,
moment and GIL. Paths:
- "python": `torch.empty(n, dtype=torch.uint8)` then dropping it, in a Python loop (what Python code
  does). PyTorch's binding releases the GIL around the allocation (at::empty runs without it) and
  the free runs under it (the tensor's Python destructor).
- "C++": the same at::empty + drop in a C++ loop of a small extension built once with
  torch.utils.cpp_extension.load, which releases the GIL for the whole loop: the allocator
  with the dispatcher's cost around it and no Python.
- 1 thread: the process's thread pinned to one core. 2 threads: two threads doing the same loop at
  once, the process allowed on two cores; the time is the wall time from a common start until both
  finish, divided by the iterations of one thread. The two threads are the same for every loop
  of a process (Team).
Reported per row: the mean of each over all pairs, their ratio with a 95% interval (a bootstrap
over blocks of consecutive pairs), and for "python" with 2 threads how many loops of each ran in
the GIL's waking mode (docs/method/cpu-allocator-benchmarks.md).

Part 2, the allocators alone, both in one process: c10::Allocator::allocate(n) and the DataPtr's
drop, in a C++ loop with the GIL released, through c10::GetDefaultCPUAllocator() (PyTorch's) and
umem's, in PAIRS alternating pairs of timed loops, for the same SIZES, 1 and 2 threads. No
dispatcher, no tensor: what each allocator costs a CPU tensor. Reported: the median over pairs of
each, and the lowest and highest per-pair ratio.

Part 3, a small CPU training loop: an MLP (512 -> 512 -> 512 -> 10, ReLU, batch 64, cross
entropy) and a tiny transformer encoder (2 layers, d_model 128, 4 heads, feed-forward 512, sequence
32, batch 8; sized for a 2-core machine), STEPS steps of Adam each with a fresh random batch per
step, the same seed for both contenders, PyTorch's default intra-op threads, no pinning. Each
contender trains in a process of its own (umem cannot be switched off mid-training), forked from
one that imported torch, and the two train in lockstep (lockstep.py), taking turns every TURN_STEPS
steps, as do two trials of PyTorch's allocator (the control), for TRAINING_ROUNDS rounds; the ratio
and its verdict are step_verdict.py's, against 1. Reported per model: the median step time of each,
umem / PyTorch with its interval and verdict, the control's ratio, and the final loss (equal bit for
bit when both computed the same thing; the table says whether every trial agreed).

    /usr/bin/python3 bench/torch_alloc/cpu_alloc_free.py [--quick]   # from the repository root

--quick: few iterations, rounds and steps (a smoke test; its numbers are not for claims).
umem is found like the Python tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path);
TORCH_EXTENSIONS_DIR defaults to a folder under /tmp so both extensions are built once."""
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import lockstep
import step_verdict as sv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SIZES = [64, 256, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
PATHS = ("python", "C++")
THREADS = (1, 2)
QUICK = "--quick" in sys.argv
LOOP_SECONDS = 0.01 if QUICK else 0.05  # one timed loop of part 2; its iterations are calibrated
PAIR_SECONDS = 0.005 if QUICK else 0.01  # one timed loop of part 1
ROUNDS = 1 if QUICK else 3  # part 1's processes
PART1_PAIRS = 4 if QUICK else 60  # per row and process
PAIRS = 3 if QUICK else 15  # part 2
BLOCK = 5  # part 1's interval resamples blocks of this many consecutive pairs
# A 2-thread Python loop is in the GIL's waking mode when its CPU time per operation and thread is
# above this many times the same allocator's 1-thread time.
WAKING_MODE = 1.5
# 7: the bootstrap's median then stays clear of one round that another process disturbed (a
# control pair once read 0.62), which at 5 rounds set the interval's end.
TRAINING_ROUNDS = 1 if QUICK else 7
STEPS = 10 if QUICK else 200
# Part 3's trials take turns every this many steps, not every step: the partner's step between two
# of a trial's evicts its model and optimizer state from the caches, which made every step cold and
# hid the allocators' difference in the MLP (its per-step ratios then read 0.75-1.04 between two
# trials of the same allocator). A ratio compares step i of one trial with step i of the other, the
# same number of steps after a turn began.
TURN_STEPS = 10
CONTENDERS = ("torch", "umem")
MODELS = ("MLP", "transformer")
TRIAL_TIMEOUT_S = 600  # one training trial of part 3

LOOP_SOURCE = r"""
#include <c10/core/CPUAllocator.h>
#include <torch/extension.h>
// at::empty + drop, `iterations` times, with the GIL released for the whole loop.
int64_t alloc_free_loop(int64_t size, int64_t iterations) {
  pybind11::gil_scoped_release no_gil;
  for (int64_t i = 0; i < iterations; ++i) {
    at::Tensor t = at::empty({size}, at::TensorOptions().dtype(at::kByte));
  }
  return iterations;
}
// Makes c10's CPU allocator PyTorch's DefaultCPUAllocator (umem false) or the one in force at the
// first call (umem's, after enable_host()); priority 255 is at least any other, and c10's
// SetAllocator replaces at >= (c10/core/Allocator.cpp). Whether it took.
bool use_allocator(bool umem) {
  static c10::Allocator* const enabled = c10::GetCPUAllocator();
  c10::Allocator* a = umem ? enabled : c10::GetDefaultCPUAllocator();
  c10::SetCPUAllocator(a, 255);
  return c10::GetCPUAllocator() == a;
}
// allocate + drop through PyTorch's DefaultCPUAllocator (current=false) or c10's current CPU
// allocator, `iterations` times, with the GIL released for the whole loop.
int64_t allocator_loop(bool current, int64_t size, int64_t iterations) {
  pybind11::gil_scoped_release no_gil;
  c10::Allocator* a = current ? c10::GetCPUAllocator() : c10::GetDefaultCPUAllocator();
  for (int64_t i = 0; i < iterations; ++i) {
    c10::DataPtr p = a->allocate(static_cast<size_t>(size));
    asm volatile("" : : "r"(p.get()) : "memory");  // the allocation is used: not elided
  }
  return iterations;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("alloc_free_loop", &alloc_free_loop);
  m.def("allocator_loop", &allocator_loop);
  m.def("use_allocator", &use_allocator);
}
"""


def environment():
    os.environ.setdefault("TORCH_EXTENSIONS_DIR",
                          os.path.join(tempfile.gettempdir(), "umem_torch_extensions"))
    default_library = os.path.join(ROOT, "build", "release", "python", "umem", "libumem_torch.so")
    if os.path.exists(default_library):
        os.environ.setdefault("UMEM_TORCH_LIBRARY", default_library)
    sys.path.insert(0, os.path.join(ROOT, "python"))


def loop_extension():
    """The loop extension, built on first use. Its source is written only when it changed: PyTorch
    1.13's load_inline rewrites its file on every call, so ninja rebuilt it (18 s) in every
    process."""
    from torch.utils.cpp_extension import load
    folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "umem_bench_sources")
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "cpu_alloc_free_loop.cpp")
    if not os.path.exists(source) or open(source).read() != LOOP_SOURCE:
        with open(source, "w") as f:
            f.write(LOOP_SOURCE)
    return load("umem_bench_cpu_alloc_free_loop", [source], extra_cflags=["-O2"], verbose=False)


def start(allocator):
    """Imports torch with `allocator` as its CPU allocator and proves it serves CPU tensors."""
    environment()
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable_host()
    from umem import _lib
    probe = torch.empty(4096, dtype=torch.uint8)
    owned = bool(_lib.lib().umem_torch_owns(probe.data_ptr()))
    if owned != (allocator == "umem"):
        sys.exit(f"the {allocator} process: umem_torch_owns(torch.empty(...)) is {owned}")
    return torch


def python_loop(torch, size, iterations):
    for _ in range(iterations):
        t = torch.empty(size, dtype=torch.uint8)
        del t


class Team:
    """`threads` threads kept for the process's life, which run one body at a time, all at once.
    Timed loops then measure the body alone: a new thread costs 0.1-0.5 ms to start, and umem
    makes a thread's cache at its first allocation, which a loop of new threads would time again
    and again. Started from the thread whose affinity they inherit."""
    def __init__(self, threads):
        self.start = threading.Barrier(threads + 1)
        self.done = threading.Barrier(threads + 1)
        self.body = None
        self.cpu = [0] * threads
        self.error = None  # a body's exception, raised by run() (a thread that died would hang it)
        for i in range(threads):
            threading.Thread(target=self.work, args=(i,), daemon=True).start()

    def work(self, i):
        while True:
            self.start.wait()
            c0 = time.thread_time_ns()
            try:
                self.body()
            except BaseException as e:  # run() raises it
                self.error = e
            self.cpu[i] = time.thread_time_ns() - c0
            self.done.wait()

    def run(self, body):
        """(wall ns from the common start until every thread ended, CPU ns of all threads)."""
        self.body = body
        self.start.wait()
        t0 = time.perf_counter_ns()
        self.done.wait()
        if self.error is not None:
            raise self.error
        return time.perf_counter_ns() - t0, sum(self.cpu)


TEAMS = {}


def timed_with_cpu(body, threads):
    """(wall ns, CPU ns of all threads) of `body` run by `threads` threads at once, from a common
    start until all end."""
    if threads == 1:
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        body()
        return time.perf_counter_ns() - t0, time.thread_time_ns() - c0
    if threads not in TEAMS:
        TEAMS[threads] = Team(threads)
    return TEAMS[threads].run(body)


def timed(body, threads):
    """Wall ns of `body` run by `threads` threads at once, from a common start until all end."""
    return timed_with_cpu(body, threads)[0]


def calibrated(body, threads, seconds=LOOP_SECONDS):
    """Iterations for which one timed loop of `body(iterations)` lasts about `seconds`. A loop that
    reaches a tenth of that is timed twice and counts with the faster time: one-off costs (a pool's
    first growth for a size, a page of the process's first use) in a short loop once set counts of
    a few dozen iterations, and every loop of that row then timed little but overhead."""
    iterations = 16
    while True:
        elapsed = timed(lambda: body(iterations), threads)
        if elapsed > seconds * 1e8:
            elapsed = min(elapsed, timed(lambda: body(iterations), threads))
        if elapsed > seconds * 1e8 or iterations >= 1 << 24:
            return max(16, int(iterations * seconds * 1e9 / max(elapsed, 1)))
        iterations *= 4


def measure_alloc_free(allocator):
    """Part 1, in a umem process: {path|threads|size: [[PyTorch's ns, umem's ns, PyTorch's CPU ns,
    umem's CPU ns] per pair]}, per operation (CPU: per operation and thread)."""
    torch = start(allocator)
    loop = loop_extension()
    from umem import _lib
    owns = _lib.lib().umem_torch_owns

    def use(umem):
        """Switches c10's CPU allocator and proves that it serves CPU tensors now."""
        probe = torch.empty(4096, dtype=torch.uint8) if loop.use_allocator(umem) else None
        if probe is None or bool(owns(probe.data_ptr())) != umem:
            sys.exit(f"switching to {'umem' if umem else 'PyTorch'}'s CPU allocator failed")
    use(True)  # the first switch remembers umem's allocator
    cores = sorted(os.sched_getaffinity(0))
    out = {}
    for threads in THREADS:
        # The calling thread's affinity; threads started afterwards inherit it.
        os.sched_setaffinity(0, cores[-threads:] if len(cores) >= threads else cores)
        for path in PATHS:
            for size in SIZES:
                if path == "python":
                    def body(iterations):
                        python_loop(torch, size, iterations)
                else:
                    def body(iterations):
                        loop.alloc_free_loop(size, iterations)
                counts = {}
                for umem in (False, True):  # each its own count, as in part 2
                    use(umem)
                    counts[umem] = calibrated(body, threads, PAIR_SECONDS)  # also the warm-up
                pairs = []
                for i in range(PART1_PAIRS):
                    runs = {}
                    for umem in ((False, True) if i % 2 == 0 else (True, False)):
                        use(umem)
                        n = counts[umem]
                        wall, cpu = timed_with_cpu(lambda: body(n), threads)
                        runs[umem] = (wall / n, cpu / (n * threads))
                    pairs.append([runs[False][0], runs[True][0], runs[False][1], runs[True][1]])
                out[f"{path}|{threads}|{size}"] = pairs
    os.sched_setaffinity(0, cores)
    return out


def measure_allocators(allocator):
    """Part 2, in a umem process: {threads|size: [(PyTorch's ns, umem's ns) per pair]}."""
    start(allocator)
    loop = loop_extension()
    cores = sorted(os.sched_getaffinity(0))
    out = {}
    for threads in THREADS:
        os.sched_setaffinity(0, cores[-threads:] if len(cores) >= threads else cores)
        for size in SIZES:
            bodies = [lambda n, current=current: loop.allocator_loop(current, size, n)
                      for current in (False, True)]
            # Each its own count: with one count for both, PyTorch's 64 MiB loop (about 1000
            # times umem's time there) ran for minutes per pair.
            counts = [calibrated(b, threads) for b in bodies]
            out[f"{threads}|{size}"] = [
                [timed(lambda b=b, n=n: b(n), threads) / n for b, n in zip(bodies, counts)]
                for _ in range(PAIRS)]
    os.sched_setaffinity(0, cores)
    return out


def print_allocators(rounds):
    pairs = rounds["umem"][0]
    print(f"| threads | size (B) | PyTorch's DefaultCPUAllocator (ns) | umem (ns) | PyTorch / umem "
          f"| lowest and highest of {PAIRS} pairs |")
    print("|---|---|---|---|---|---|")
    for key, runs in pairs.items():
        threads, size = key.split("|")
        theirs = statistics.median(r[0] for r in runs)
        ours = statistics.median(r[1] for r in runs)
        ratios = [r[0] / r[1] for r in runs]
        print(f"| {threads} | {size} | {theirs:.0f} | {ours:.0f} | {theirs / ours:.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")


def tiny_transformer(nn):
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, dropout=0.0,
                                       batch_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, num_layers=2), nn.Flatten(1),
                         nn.Linear(32 * 128, 10))


def train_trial(allocator, model_name, turn):
    """STEPS training steps of `model_name` under `allocator`, TURN_STEPS at a time between
    turn.wait() and turn.done() (lockstep.py): each step's ms and the final loss."""
    torch = start(allocator)
    nn = torch.nn
    torch.manual_seed(0)
    if model_name == "MLP":
        model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512),
                              nn.ReLU(), nn.Linear(512, 10))
        batch_shape = (64, 512)
    else:
        model = tiny_transformer(nn)
        batch_shape = (8, 32, 128)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    steps = []
    for i in range(STEPS):
        if i % TURN_STEPS == 0:
            turn.wait()
        t0 = time.perf_counter_ns()
        x = torch.randn(*batch_shape, generator=generator)
        y = torch.randint(0, 10, (batch_shape[0],), generator=generator)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        steps.append((time.perf_counter_ns() - t0) / 1e6)
        if i % TURN_STEPS == TURN_STEPS - 1 or i == STEPS - 1:
            turn.done()
    return {"step_ms": steps, "loss": loss.item()}


def measure_training(measured):
    """Part 3: per round and model, `measured` and PyTorch's allocator train in lockstep, and so do
    two trials of PyTorch's (the control); which pair and which side goes first alternates from
    round to round. Every trial record: model, round, pair, side, step_ms, loss."""
    environment()
    import torch  # noqa: F401 (once, here: the trials fork from this process)
    pairs = {"umem": (measured, "torch"), "control": ("torch", "torch")}
    trials = []
    for r in range(TRAINING_ROUNDS):
        for model in MODELS:
            for pair, sides in lockstep.order(r, pairs):
                outs = lockstep.run(
                    [lambda turn, a=a, m=model: train_trial(a, m, turn) for _, a in sides],
                    [f"{a} {model}" for _, a in sides], -(-STEPS // TURN_STEPS),
                    TRIAL_TIMEOUT_S)
                trials += [dict(out, model=model, round=r, pair=pair, side=side, allocator=a)
                           for out, (side, a) in zip(outs, sides)]
    return trials


def machine_facts():
    import torch
    try:
        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = "unknown"
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"torch {torch.__version__} ({torch.get_num_threads()} intra-op threads), "
            f"umem {commit}, load average {os.getloadavg()[0]:.2f}")


def run_child(allocator, part):
    r = subprocess.run([sys.executable, __file__, "--child", allocator, part]
                       + (["--quick"] if QUICK else []),
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"the {allocator} {part} run failed:\n{r.stdout[-2000:]}{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ratio_interval(rounds_of_pairs):
    """95% interval of mean(PyTorch) / mean(umem): a bootstrap over blocks of BLOCK consecutive
    pairs of a process (neighbouring loops share the GIL's mode and the machine's moment)."""
    blocks = [pairs[i:i + BLOCK] for pairs in rounds_of_pairs for i in range(0, len(pairs), BLOCK)]
    rng = random.Random(0)
    ratios = []
    for _ in range(1000):
        theirs = ours = 0.0
        for _ in blocks:
            for p in blocks[rng.randrange(len(blocks))]:
                theirs += p[0]
                ours += p[1]
        ratios.append(theirs / ours)
    ratios.sort()
    return ratios[25], ratios[974]


def print_alloc_free(rounds):
    runs = rounds["umem"]
    print("| path | threads | size (B) | PyTorch's CPU allocator (ns) | umem (ns) | PyTorch / umem "
          "| 95% interval | loops in the GIL's waking mode, PyTorch / umem |")
    print("|---|---|---|---|---|---|---|---|")
    slower = []
    for key in runs[0]:
        path, threads, size = key.split("|")
        pairs = [p for run in runs for p in run[key]]
        theirs = statistics.mean(p[0] for p in pairs)
        ours = statistics.mean(p[1] for p in pairs)
        low, high = ratio_interval([run[key] for run in runs])
        if high < 1:
            slower.append(f"{path}, {threads} thread{'s' if threads != '1' else ''}, {size} B")
        modes = ""
        if path == "python" and threads == "2":
            # CPU time per operation and thread against the same allocator's 1-thread time.
            alone = [statistics.mean(p[i] for run in runs for p in run[f"python|1|{size}"])
                     for i in (0, 1)]
            modes = " / ".join(f"{sum(p[2 + i] > WAKING_MODE * alone[i] for p in pairs)}"
                               for i in (0, 1)) + f" of {len(pairs)}"
        print(f"| {path} | {threads} | {size} | {theirs:.0f} | {ours:.0f} | {theirs / ours:.2f} | "
              f"{low:.2f}-{high:.2f} | {modes} |")
    print(f"\nRows where umem is slower (the whole interval below 1): "
          f"{'; '.join(slower) if slower else 'none'}.")


def print_training(rounds):
    """Part 3's table: per model, the lockstep ratios umem / PyTorch and control / PyTorch
    (step_verdict.py) with their intervals, and umem's verdict on "at least as fast"."""
    trials = rounds["umem"][0]
    pairs = ("umem", "control")
    print(f"| model ({STEPS} Adam steps) | rounds | PyTorch's step (ms) | umem's step (ms) | "
          f"umem / PyTorch step in lockstep [{sv.CONFIDENCE:.0%} interval] | umem at least as "
          "fast | control / PyTorch step in lockstep | final loss | equal in every trial |")
    print("|---|---|---|---|---|---|---|---|---|")
    timed = slice(STEPS // 2, None)
    per_round = {}
    for model in MODELS:
        complete = lockstep.complete_rounds([t for t in trials if t["model"] == model], pairs)
        ratios = {pair: sv.round_ratios(complete, pair) for pair in pairs}
        ci = {pair: sv.interval(ratios[pair]) for pair in pairs}
        # Each contender's steps in the umem pairs, the ones the ratio compares.
        step = {a: statistics.median(statistics.median(t["step_ms"][timed])
                                     for r in complete for t in r["umem"] if t["allocator"] == a)
                for a in CONTENDERS}
        losses = {t["loss"] for r in complete for pair in r.values() for t in pair}
        per_round[model] = ratios
        print(f"| {model} | {len(complete)} | {step['torch']:.2f} | {step['umem']:.2f} | "
              f"{sv.shown(statistics.median(ratios['umem']), ci['umem'])} | "
              f"{sv.verdict(ci['umem'], ci['control'], 1.0)} | "
              f"{sv.shown(statistics.median(ratios['control']), ci['control'])}, "
              f"margin {sv.margin(ci['control']):.3f} | "
              f"{next(iter(losses))!r} | {'yes' if len(losses) == 1 else 'NO'} |")
    print(f"\nIn lockstep the two trials of a pair take turns every {TURN_STEPS} steps; a pair's "
          "ratio is the median of its per-step ratios over the last half of the steps; \"ok\": the "
          "interval, widened by the control's margin, is at or below 1; \"MISSED\": above 1; "
          "\"inconclusive\": the two differ by less than the method can tell (step_verdict.py). "
          "The step columns are the medians of the umem pairs' trials, the steps the ratio "
          "compares. Per round, each pair's ratio:")
    for model in MODELS:
        for pair in pairs:
            print(f"- {model} {pair}: " + ", ".join(f"{x:.3f}" for x in per_round[model][pair]))


def main():
    if "--child" in sys.argv:
        i = sys.argv.index("--child")
        allocator, part = sys.argv[i + 1], sys.argv[i + 2]
        measure = {"alloc_free": measure_alloc_free, "allocators": measure_allocators,
                   "training": measure_training}[part]
        print(json.dumps(measure(allocator)))
        return
    environment()
    loop_extension()  # built once here, before the children load it
    print(machine_facts())
    parts = (("alloc_free", print_alloc_free, ROUNDS, ("umem",)),
             ("allocators", print_allocators, 1, ("umem",)),
             ("training", print_training, 1, ("umem",)))
    for part, show, repeat, contenders in parts:
        rounds = {a: [] for a in contenders}
        for _ in range(repeat):
            for allocator in contenders:
                rounds[allocator].append(run_child(allocator, part))
        print()
        show(rounds)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
