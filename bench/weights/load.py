"""Loading a safetensors file (1 GiB by default, made here) three ways, each in a process of its
own, the file in the page cache (read once before): a plain sequential read into one buffer (the
anchor), umem.torch.load_safetensors (default configuration, and with huge_pages:false, since
the first touch of fresh huge pages dominates in some virtual machines), and what torch.load-style
loaders do (the whole file read
into memory, then every tensor copied out of it). Prints a markdown table: seconds, GB/s, speed
against the plain read, and peak extra resident memory (VmHWM after the load less VmRSS before,
peak reset through /proc/self/clear_refs) against the tensor bytes. Targets (docs/results.md):
umem's peak extra memory <= 1.05x the tensor bytes, its speed >= 0.9x the plain read's.

Note [Guest warm-up]: in a virtual machine the hypervisor backs guest memory lazily, so the first
touch of guest-physical pages that the guest never used since it booted costs a host fault per
4 KiB (measured in this project's 2-core VM: 3.7 s of CPU per GiB of fresh huge pages against
0.2 s for huge pages freed just before). Fresh transparent huge pages come from such untouched
memory far more often than 4 KiB pages, so such a VM charges huge pages a cost that bare metal
and any long-running machine do not have. By default each measuring process therefore first
touches and frees twice the file's size in huge pages, the same for every method, so all of them
get memory the host already backs; --cold skips that, to show the VM's own cost.

    python3 bench/weights/load.py [--gib N] [--rounds R] [--dir DIR] [--cold]

umem is found like the tests find it (UMEM_TORCH_LIBRARY, python/ on sys.path)."""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
TENSOR = 64 << 20  # bytes per tensor
UMEM_4K = "umem, huge_pages:false"  # first touch of huge pages costs more in some VMs


def make_file(path, total):
    count = max(1, total // TENSOR)
    header, at = {}, 0
    for i in range(count):
        header[f"layer{i}.weight"] = {"dtype": "F32", "shape": [TENSOR // 4],
                                      "data_offsets": [at, at + TENSOR]}
        at += TENSOR
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    block = bytes(range(256)) * (TENSOR // 256)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _ in range(count):
            f.write(block)
    return count * TENSOR


def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def warm_guest(nbytes):
    """Note [Guest warm-up]: touches and frees `nbytes` of huge pages."""
    import mmap
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_HUGEPAGE)
    chunk = bytes(64 << 20)
    for at in range(0, nbytes - len(chunk) + 1, len(chunk)):
        m[at:at + len(chunk)] = chunk
    m.close()


def measure(method, path, warm):
    import torch
    if warm:
        warm_guest(2 * os.path.getsize(path))
    if method.startswith("umem"):
        import umem.torch as ut
        ut.empty(1)  # the bridge exists before the measurement, as in a program that uses umem
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current VmRSS
    before = status("VmRSS")
    t0 = time.perf_counter()
    if method == "plain read":
        size = os.path.getsize(path)
        buf = bytearray(size)
        with open(path, "rb", buffering=0) as f:
            view, done = memoryview(buf), 0
            while done < size:
                done += f.readinto(view[done:])
        keep = buf
    elif method.startswith("umem"):
        keep = ut.load_safetensors(path)
    else:  # read it all, then copy every tensor out (what torch.load-style loading does)
        with open(path, "rb") as f:
            raw = f.read()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        keep = {name: torch.frombuffer(raw, dtype=torch.float32, count=(e["data_offsets"][1] - e["data_offsets"][0]) // 4,
                                       offset=base + e["data_offsets"][0]).clone()
                for name, e in header.items()}
        del raw
    seconds = time.perf_counter() - t0
    peak = status("VmHWM") - before
    del keep
    return {"seconds": seconds, "peak_extra": peak}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], sys.argv[4] == "warm")))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to make the file (default: a temp folder)")
    p.add_argument("--cold", action="store_true",
                   help="no guest warm-up (Note [Guest warm-up]): the VM's first-touch cost counts")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        path = os.path.join(d, "model.safetensors")
        tensor_bytes = make_file(path, int(a.gib * (1 << 30)))
        with open(path, "rb") as f:  # into the page cache
            while f.read(64 << 20):
                pass
        methods = ["plain read", "umem", UMEM_4K, "read then copy (torch.load-style)"]
        runs = {m: [] for m in methods}
        for _ in range(a.rounds):
            for m in methods:
                env = dict(os.environ)
                if m == UMEM_4K:
                    env["UMEM_ALLOC_CONF"] = "huge_pages:false"
                r = subprocess.run([sys.executable, __file__, "--measure", m, path,
                                    "cold" if a.cold else "warm"],
                                   capture_output=True, text=True, timeout=600, env=env)
                if r.returncode != 0:
                    sys.exit(f"{m} failed:\n{r.stderr[-3000:]}")
                runs[m].append(json.loads(r.stdout.strip().splitlines()[-1]))
    anchor = statistics.median(x["seconds"] for x in runs["plain read"])
    print(f"file: {tensor_bytes / (1 << 30):.2f} GiB of tensors, in the page cache; median of "
          f"{a.rounds} rounds, a process per run; "
          f"{'no guest warm-up' if a.cold else 'guest warm-up (Note [Guest warm-up])'}\n")
    print("| method | seconds | GB/s | speed vs plain read (umem >= 0.9) | peak extra memory / "
          "tensor bytes (umem <= 1.05) |")
    print("|---|---|---|---|---|")
    for m in methods:
        s = statistics.median(x["seconds"] for x in runs[m])
        peak = statistics.median(x["peak_extra"] for x in runs[m])
        print(f"| {m} | {s:.3f} | {tensor_bytes / s / 1e9:.2f} | {anchor / s:.2f} | "
              f"{peak / tensor_bytes:.2f} |")


if __name__ == "__main__":
    main()
