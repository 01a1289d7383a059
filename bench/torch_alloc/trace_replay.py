"""Real PyTorch allocation traces replayed from C++ through PyTorch's allocator interface
(c10::cuda::CUDACachingAllocator raw_alloc_with_stream / raw_delete), once with PyTorch's own
allocator and once with umem installed by `umem.torch.enable()` (default configuration), each in a
process of its own on the same GPU, pinned to one core where taskset exists. The replay is
bench/trace_replay/cca/cca_replay.cpp, built here as a library with torch.utils.cpp_extension
(like umem's extension) and loaded into each process after PyTorch, so its calls reach whichever
allocator PyTorch has. Prints the replay's own report lines and a markdown table: warm median
and p99 nanoseconds per call and PyTorch's median / umem's (>= 1: umem is no slower).

    python3 bench/torch_alloc/trace_replay.py TRACE.csv[.gz]...   # on a GPU machine

umem is found like the GPU tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import ctypes
import gzip
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPLAY = os.path.join(HERE, "..", "trace_replay")


def build(folder):
    """The replay library, built into `folder`; its path."""
    from torch.utils import cpp_extension
    cpp_extension.load(
        name="cca_trace_replay",
        sources=[os.path.join(REPLAY, "cca", "cca_replay.cpp"),
                 os.path.join(REPLAY, "trace.cpp"), os.path.join(REPLAY, "report.cpp")],
        extra_include_paths=[REPLAY, os.path.join(HERE, "..", "..", "core", "include")],
        extra_cflags=["-O2"], with_cuda=True, is_python_module=False, build_directory=folder,
        verbose=False)
    return os.path.join(folder, "cca_trace_replay.so")


def replay(allocator, library, trace, name):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    import torch
    if allocator == "umem":
        import umem.torch as ut
        ut.enable()
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context and the allocator exist before the replay
    lib = ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
    args = [b"cca-trace-replay", b"--label", allocator.encode(), trace.encode(), name.encode()]
    argv = (ctypes.c_char_p * len(args))(*args)
    lib.cca_replay_main.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    rc = lib.cca_replay_main(len(args), argv)
    ctypes.CDLL(None).fflush(None)  # the replay printed through C's stdio
    sys.exit(rc)


def plain_csv(path, tmp):
    if not path.endswith(".gz"):
        return path
    out = os.path.join(tmp, os.path.basename(path)[:-3])
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--child":
        replay(*sys.argv[2:])
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = []
    pin = ["taskset", "-c", "2"] if shutil.which("taskset") else []
    with tempfile.TemporaryDirectory() as tmp:
        library = build(tmp)
        for path in sys.argv[1:]:
            name = os.path.basename(path)
            csv = plain_csv(path, tmp)
            results = {}
            for allocator in ("torch", "umem"):
                r = subprocess.run(pin + [sys.executable, __file__, "--child", allocator, library,
                                          csv, name], capture_output=True, text=True, timeout=900)
                sys.stdout.write(r.stdout)
                if r.returncode != 0:
                    sys.exit(f"the {allocator} replay of {name} failed (exit {r.returncode}):\n"
                             f"{r.stderr[-4000:]}")
                line = [x for x in r.stdout.splitlines() if x.startswith("result,")][-1]
                f = line.split(",")
                results[allocator] = dict(peak_allocated=int(f[3]), peak_reserved=int(f[4]),
                                          median=float(f[8]), p99=float(f[9]))
            rows.append((name, results))
    print("| trace | allocator | peak reserved (GiB) | warm median (ns) | warm p99 (ns) | "
          "PyTorch median / umem median |")
    print("|---|---|---|---|---|---|")
    for name, results in rows:
        theirs = results["torch"]["median"]
        for allocator, r in results.items():
            ratio = f"{theirs / r['median']:.2f}" if allocator == "umem" else ""
            print(f"| {name} | {allocator} | {r['peak_reserved'] / 2**30:.3f} | {r['median']:.0f} | "
                  f"{r['p99']:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
