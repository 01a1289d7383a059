"""What the CUDA driver answers to cuMemHostRegister of memory umem did not allocate, and what a
registration costs against a copy: the facts behind the CUDA double's cuMemHostRegister rules and
foreign_alias_min (docs/log/2026-12-06-foreign-memory.md). Run on a machine with an NVIDIA GPU,
numpy and PyTorch: python3 tests/gpu_cuda/probe_register.py. Prints one JSON line "PROBE {...}"."""
import ctypes
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import torch

PORTABLE, DEVICEMAP, READ_ONLY = 1, 2, 8
FLAGS = PORTABLE | DEVICEMAP
PAGE = os.sysconf("SC_PAGESIZE")
PROT_READ, PROT_RW = 1, 3
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS = 0x01, 0x02, 0x20

cu = ctypes.CDLL("libcuda.so.1")
cu.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
cu.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
cu.cuMemHostGetDevicePointer_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p,
                                            ctypes.c_uint]
cu.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
cu.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def name(r):
    s = ctypes.c_char_p()
    cu.cuGetErrorName(r, ctypes.byref(s))
    return s.value.decode() if s.value else str(r)


def register(p, n, flags=FLAGS):
    return name(cu.cuMemHostRegister_v2(p, n, flags))


def unregister(p):
    return name(cu.cuMemHostUnregister(p))


def device_pointer(p):
    d = ctypes.c_uint64()
    r = cu.cuMemHostGetDevicePointer_v2(ctypes.byref(d), p, 0)
    return [name(r), d.value == p if r == 0 else None]


def anonymous(n, prot=PROT_RW):
    return libc.mmap(None, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)


def file_map(folder, flags, prot=PROT_RW):
    fd, path = tempfile.mkstemp(dir=folder)
    os.unlink(path)
    os.ftruncate(fd, 2 * PAGE)
    return libc.mmap(None, 2 * PAGE, prot, flags, fd, 0)


def main():
    cu.cuInit(0)
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    cu.cuCtxSetCurrent(ctx)
    out = {"kernel": os.uname().release,
           "filesystems": subprocess.run(["df", "-T", "/tmp", "/dev/shm"], capture_output=True,
                                         text=True).stdout.splitlines()[1:]}
    a = anonymous(4 * PAGE)
    out["anonymous"] = register(a, 4 * PAGE)
    out["anonymous device pointer, inside"] = [device_pointer(a), device_pointer(a + 100)]
    out["the same range again"] = register(a, 4 * PAGE)
    out["overlapping"] = register(a + 2 * PAGE, 4 * PAGE)
    out["a page inside"] = register(a + PAGE, PAGE)
    out["unregister inside"] = unregister(a + PAGE)
    out["unregister"] = unregister(a)
    out["unregister again"] = unregister(a)
    ro = anonymous(2 * PAGE, PROT_READ)
    out["read-only"] = register(ro, 2 * PAGE)
    out["read-only with READ_ONLY"] = register(ro, 2 * PAGE, FLAGS | READ_ONLY)
    unregister(ro)
    hole = anonymous(3 * PAGE)
    libc.munmap(hole + PAGE, PAGE)
    out["a hole"] = register(hole, 3 * PAGE)
    u = anonymous(4 * PAGE)
    out["unaligned"] = register(u + 100, 5000)
    out["another range in the same page"] = register(u + 5200, 100)
    for folder in ("/tmp", "/dev/shm"):
        for kind, flags in (("shared", MAP_SHARED), ("private", MAP_PRIVATE)):
            p = file_map(folder, flags)
            out[f"{kind} map of a file in {folder}"] = r = register(p, 2 * PAGE)
            if r == "CUDA_SUCCESS":
                unregister(p)
    fd = os.memfd_create("probe")
    os.ftruncate(fd, 2 * PAGE)
    out["shared memfd map"] = register(libc.mmap(None, 2 * PAGE, PROT_RW, MAP_SHARED, fd, 0),
                                       2 * PAGE)
    shared = torch.zeros(4096).share_memory_()
    out["PyTorch shared-memory tensor"] = register(shared.data_ptr(), shared.numel() * 4)
    pinned = ctypes.c_void_p()
    cu.cuMemHostAlloc(ctypes.byref(pinned), 8 * PAGE, 0)
    out["cuMemHostAlloc'd: device pointer, register"] = [device_pointer(pinned.value),
                                                         register(pinned.value, 8 * PAGE)]
    for mib in (1, 16, 256):
        n = mib << 20
        x = np.ones(n // 4, dtype=np.float32)
        y = np.empty_like(x)
        t0 = time.perf_counter()
        r = register(x.ctypes.data, n)
        t1 = time.perf_counter()
        unregister(x.ctypes.data)
        t2 = time.perf_counter()
        np.copyto(y, x)  # touches y
        t3 = time.perf_counter()
        np.copyto(y, x)
        t4 = time.perf_counter()
        out[f"{mib} MiB ms"] = {"register": round((t1 - t0) * 1e3, 3), "status": r,
                                "unregister": round((t2 - t1) * 1e3, 3),
                                "copy": round((t4 - t3) * 1e3, 3)}
    print("PROBE " + json.dumps(out))


if __name__ == "__main__":
    main()
