"""Growing a device segment and giving it back, through PyTorch: with PyTorch's allocator
(`expandable_segments:True`) and with umem (default configuration), each in a process of its own.
Each process keeps an 8 MiB tensor (so the segment never becomes entirely free), then twice:
allocates and fills 1 GiB, frees it and calls `torch.cuda.empty_cache()`. Prints a markdown table
of milliseconds for the allocation and fill, for `empty_cache`, and MiB reserved after it, per
pass (the first pass grows the segment, the second takes given-back memory again).

    python3 bench/torch_alloc/grow_release.py      # on a GPU machine, from the repository root

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import json
import os
import subprocess
import sys
import time

GIB = 1 << 30
PASSES = ("first 1 GiB", "after empty_cache")


def measure(allocator):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    keep = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
    out = []
    for _ in PASSES:
        t0 = time.perf_counter()
        x = torch.empty(GIB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        grow_ms = (time.perf_counter() - t0) * 1e3
        del x
        t0 = time.perf_counter()
        torch.cuda.empty_cache()
        release_ms = (time.perf_counter() - t0) * 1e3
        out.append({"grow_ms": grow_ms, "empty_cache_ms": release_ms,
                    "reserved_mib": torch.cuda.memory_reserved() >> 20})
    del keep
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("torch", "umem"):
        print(json.dumps(measure(sys.argv[1])))
        return
    results = {}
    for allocator in ("torch", "umem"):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
        r = subprocess.run([sys.executable, __file__, allocator], capture_output=True, text=True,
                           timeout=300, env=env)
        if r.returncode != 0:
            sys.exit(f"the {allocator} run failed:\n{r.stderr[-4000:]}")
        results[allocator] = json.loads(r.stdout.strip().splitlines()[-1])
    print("| pass | PyTorch expandable alloc+fill (ms) | umem alloc+fill (ms) | PyTorch "
          "empty_cache (ms) | umem empty_cache (ms) | PyTorch reserved after (MiB) | umem "
          "reserved after (MiB) |")
    print("|---|---|---|---|---|---|---|")
    for i, name in enumerate(PASSES):
        t, u = results["torch"][i], results["umem"][i]
        print(f"| {name} | {t['grow_ms']:.1f} | {u['grow_ms']:.1f} | {t['empty_cache_ms']:.1f} | "
              f"{u['empty_cache_ms']:.1f} | {t['reserved_mib']} | {u['reserved_mib']} |")


if __name__ == "__main__":
    main()
