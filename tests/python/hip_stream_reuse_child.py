"""Run by test_hip_stream_reuse.py in a fresh process: the bridge on the ROCr double with HIP
events from the HIP double, which this process maps first as PyTorch for ROCm maps libamdhip64
(umem never loads HIP itself). argv: python package root, HIP double path or "-" for none.
Prints one JSON result."""
import ctypes
import json
import sys

sys.path.insert(0, sys.argv[1])
import umem._lib as L  # noqa: E402

hip = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL) if sys.argv[2] != "-" else None
if hip:
    hip.umem_hip_double_calls.restype = ctypes.c_long
    hip.umem_hip_double_calls.argtypes = [ctypes.c_char_p]
    hip.umem_hip_double_pending.argtypes = [ctypes.c_void_p]
    hip.umem_hip_double_complete.argtypes = [ctypes.c_void_p]
    hip.umem_hip_double_reset(1)
lib = L.lib()


def held():
    return L.take_json(lib.umem_torch_memory_stats_json(0))["umem.held_for_streams_bytes"]


A, B = ctypes.c_void_p(0xA000), ctypes.c_void_p(0xB000)
out = {}
size = 1 << 20
p = lib.umem_torch_pluggable_malloc(size, 0, A)
out["allocated"] = bool(p)
if hip:
    hip.umem_hip_double_pending(A)  # a kernel on A still reads p
lib.umem_torch_pluggable_free(p, size, 0, A)
out["held_after_free"] = held()
r = lib.umem_torch_pluggable_malloc(size, 0, B)  # B while A's work is pending
out["other_stream_gets_other_block"] = r is not None and r != p
if hip:
    out["events_created"] = hip.umem_hip_double_calls(b"hipEventCreateWithFlags")
    out["events_recorded"] = hip.umem_hip_double_calls(b"hipEventRecord")
    hip.umem_hip_double_complete(A)  # A's kernel finishes
s = lib.umem_torch_pluggable_malloc(size, 0, B)  # the malloc releases blocks whose events completed
out["other_stream_reuses_after_completion"] = s == p
out["held_after_completion"] = held()
if hip:
    out["current_device"] = hip.umem_hip_double_current_device()
print(json.dumps(out))
