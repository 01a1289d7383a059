"""Real PyTorch allocation traces replayed from C++ through PyTorch's allocator interface
(raw_replay.cpp: c10::cuda::CUDACachingAllocator raw_alloc_with_stream / raw_delete), with
PyTorch's own allocator and with umem (`umem.torch.enable()`, default configuration), each in a
process of its own on the same GPU, pinned to one core where taskset exists, the two alternating
for ROUNDS rounds. Each process replays the trace PASSES times without emptying the cache and
times every call of the last pass. Prints a markdown table: per trace and call kind, the median
over rounds of each process's median and p99 nanoseconds per call, and PyTorch's median / umem's
(>= 1: umem is no slower), and each allocator's peak reserved bytes.

    python3 bench/torch_alloc/trace_replay.py TRACE.csv[.gz]... [--rounds 3] [--passes 3]

Traces: `op,id,size_bytes,stream` lines (a = alloc, f = free; S/s, PyTorch's own segment
events, are skipped), the format of the traces in the shared reference folder. umem is found
like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def build(folder):
    """The replay extension, built (or found built) in `folder`."""
    from torch.utils import cpp_extension
    return cpp_extension.load(name="umem_bench_raw_replay",
                              sources=[os.path.join(HERE, "raw_replay.cpp")],
                              extra_cflags=["-O2"], with_cuda=True, build_directory=folder,
                              verbose=False)


def read_trace(path):
    """(rows [op, id, bytes, stream index], stream ids in index order, number of ids)."""
    opener = gzip.open if path.endswith(".gz") else open
    rows, streams, ids = [], {}, {}
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            op, ident, size, stream = line.split(",")
            if op not in ("a", "f"):
                continue
            index = ids.setdefault(ident, len(ids))
            s = streams.setdefault(int(stream), len(streams))
            if op == "a" and int(size) <= 0:
                sys.exit(f"{path}:{n}: an allocation of {size} bytes")
            rows.append([0 if op == "a" else 1, index, int(size), s])
    return rows, list(streams), len(ids)


def child(allocator, trace, folder, passes):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable()
    torch.empty(1, device="cuda")  # the context and the allocator exist before the replay
    module = build(folder)
    rows, stream_ids, ids = read_trace(trace)
    keep = [torch.cuda.current_stream() if s == 0 else torch.cuda.Stream() for s in stream_ids]
    events = torch.tensor(rows, dtype=torch.int64)
    ns = module.replay(events, [s.cuda_stream for s in keep], ids, passes).tolist()
    stats = torch.cuda.memory_stats()

    def summary(values):
        values = sorted(values)
        return {"median": statistics.median(values),
                "p99": values[min(len(values) - 1, int(0.99 * len(values)))]}
    print(json.dumps({"alloc": summary(v for v, r in zip(ns, rows) if r[0] == 0),
                      "free": summary(v for v, r in zip(ns, rows) if r[0] == 1),
                      "peak_reserved": stats.get("reserved_bytes.all.peak"),
                      "events": len(rows)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--passes", type=int, default=3)
    p.add_argument("--build-dir", help="where the replay extension is built and kept (default: a "
                   "temporary folder, built again each run)")
    p.add_argument("--child", nargs=2, metavar=("ALLOCATOR", "FOLDER"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.child[0], a.traces[0], a.child[1], a.passes)
        return
    pin = ["taskset", "-c", "2"] if shutil.which("taskset") else []
    print("| trace | call | PyTorch median (ns) | umem median (ns) | PyTorch / umem | "
          "PyTorch p99 (ns) | umem p99 (ns) | peak reserved PyTorch / umem (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        folder = a.build_dir or scratch
        os.makedirs(folder, exist_ok=True)
        build(folder)  # once, before the timed processes
        for trace in a.traces:
            runs = {"torch": [], "umem": []}
            for _ in range(a.rounds):
                for allocator in runs:
                    cmd = pin + [sys.executable, __file__, trace, "--passes", str(a.passes),
                                 "--child", allocator, folder]
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                    if r.returncode != 0:
                        sys.exit(f"{allocator} on {trace} failed:\n{r.stdout[-3000:]}\n"
                                 f"{r.stderr[-5000:]}")
                    runs[allocator].append(json.loads(r.stdout.strip().splitlines()[-1]))
            name = os.path.basename(trace)
            for call in ("alloc", "free"):
                med = {al: statistics.median(x[call]["median"] for x in rs)
                       for al, rs in runs.items()}
                p99 = {al: statistics.median(x[call]["p99"] for x in rs) for al, rs in runs.items()}
                peak = {al: max(x["peak_reserved"] for x in rs) / 1e6 for al, rs in runs.items()}
                print(f"| {name} ({runs['torch'][0]['events']} events) | {call} | "
                      f"{med['torch']:.0f} | {med['umem']:.0f} | {med['torch'] / med['umem']:.2f} | "
                      f"{p99['torch']:.0f} | {p99['umem']:.0f} | "
                      f"{peak['torch']:.0f} / {peak['umem']:.0f} |")
            sys.stdout.flush()
    print(f"\nrounds {a.rounds}, passes {a.passes} (the last one timed), pinned: {bool(pin)}")


if __name__ == "__main__":
    main()
