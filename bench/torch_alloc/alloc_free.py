"""One allocation and free through PyTorch, with PyTorch's own allocator and with umem (default
configuration), each in a process of its own on the same GPU, pinned to one core where taskset
exists, the two alternating for ROUNDS rounds (CPU clocks drift between processes): prints a
markdown table of the median over rounds of each process's median nanoseconds per alloc+free and
umem's ratio (PyTorch's time / umem's: >= 1 means umem is no
slower). Two paths: `torch.empty(n, device="cuda")` then dropping it (what Python code does), and
`torch.cuda.caching_allocator_alloc/_delete` (PyTorch's allocator interface with little Python
around it).

    python3 bench/torch_alloc/alloc_free.py            # on a GPU machine, from the repository root

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

SIZES = [512, 64 << 10, 1 << 20, 16 << 20, 256 << 20]
ITERATIONS = 20000
REPEATS = 5
ROUNDS = 5


def measure(allocator):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable()
    torch.cuda.init()
    out = {}
    for size in SIZES:
        iterations = ITERATIONS
        for path in ("torch.empty", "caching_allocator"):
            runs = []
            for _ in range(REPEATS):
                torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                if path == "torch.empty":
                    for _ in range(iterations):
                        t = torch.empty(size, dtype=torch.uint8, device="cuda")
                        del t
                else:
                    for _ in range(iterations):
                        torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(size))
                runs.append((time.perf_counter_ns() - t0) / iterations)
            out[f"{path} {size}"] = statistics.median(runs)
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("torch", "umem"):
        print(json.dumps(measure(sys.argv[1])))
        return
    pin = ["taskset", "-c", "2"] if shutil.which("taskset") else []
    rounds = {"torch": [], "umem": []}
    for _ in range(ROUNDS):
        for allocator in ("torch", "umem"):
            r = subprocess.run(pin + [sys.executable, __file__, allocator], capture_output=True,
                               text=True, timeout=900)
            if r.returncode != 0:
                sys.exit(f"the {allocator} run failed:\n{r.stderr[-4000:]}")
            rounds[allocator].append(json.loads(r.stdout.strip().splitlines()[-1]))
    results = {a: {k: statistics.median(run[k] for run in runs) for k in runs[0]}
               for a, runs in rounds.items()}
    spread = {a: {k: (min(run[k] for run in runs), max(run[k] for run in runs)) for k in runs[0]}
              for a, runs in rounds.items()}
    print("| path | size | PyTorch's allocator (ns) | umem (ns) | PyTorch / umem | "
          "PyTorch's rounds (ns) | umem's rounds (ns) |")
    print("|---|---|---|---|---|---|---|")
    for key, theirs in results["torch"].items():
        ours = results["umem"][key]
        path, size = key.split()
        (tl, th), (ul, uh) = spread["torch"][key], spread["umem"][key]
        print(f"| {path} | {int(size)} | {theirs:.0f} | {ours:.0f} | {theirs / ours:.2f} | "
              f"{tl:.0f}-{th:.0f} | {ul:.0f}-{uh:.0f} |")


if __name__ == "__main__":
    main()
