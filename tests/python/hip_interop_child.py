"""Run by test_hip_interop.py in a fresh process: the bridge on the ROCr double with the HIP double
mapped first (as PyTorch for ROCm maps libamdhip64) and attached to the same ROCr double, as HIP
runs over ROCr. It does to umem's memory what PyTorch for ROCm does to a tensor's (Note [GPU
visibility under HIP] in allocator/include/umem/allocator/gpu/hip_gpu_mapper.hpp) and prints one
JSON result. argv: python package root, HIP double path, ROCr double path."""
import ctypes
import json
import os
import sys

sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import umem._lib as L  # noqa: E402
from hip_double_process import attach  # noqa: E402

hip = attach(sys.argv[2], sys.argv[3])
lib = L.lib()

H2H, H2D, D2H, D2D = 0, 1, 2, 3
STREAM = ctypes.c_void_p(0xA000)
SIZE = 4 << 20
out = {}

# A device tensor: allocate, fill (hipMemsetAsync), clone (hipMemcpyAsync device to device).
p = lib.umem_torch_pluggable_malloc(SIZE, 0, STREAM)
q = lib.umem_torch_pluggable_malloc(SIZE, 0, STREAM)
out["registered"] = [hip.umem_hip_double_known(p), hip.umem_hip_double_known(q)]
out["memset"] = hip.hipMemsetAsync(p, 0x5A, SIZE, STREAM)
out["copy_d2d"] = hip.hipMemcpyAsync(q, p, SIZE, D2D, STREAM)
out["copied"] = ctypes.string_at(q + SIZE - 4, 4) == b"\x5a" * 4
# .cuda() of pageable memory and .cpu() back into pageable memory.
src = ctypes.create_string_buffer(b"\x11" * 4096, 4096)
back = ctypes.create_string_buffer(4096)
out["copy_h2d"] = hip.hipMemcpyAsync(p, src, 4096, H2D, STREAM)
out["copy_d2h"] = hip.hipMemcpyAsync(back, p, 4096, D2H, STREAM)
out["round_trip"] = back.raw == src.raw
# A host tensor (umem.torch.empty's memory) is known to HIP as well.
host = ctypes.c_void_p()
L.check(lib.umem_torch_host_malloc(SIZE, -1, ctypes.byref(host)))
out["host_registered"] = hip.umem_hip_double_known(host)
out["copy_to_host_tensor"] = hip.hipMemcpyAsync(host, p, 4096, D2H, STREAM)
out["cpu_copies"] = hip.umem_hip_double_cpu_copies()

# The cached path: a freed block serves the next request without any HIP call.
lib.umem_torch_pluggable_free(q, SIZE, 0, STREAM)
before = hip.umem_hip_double_attempts(b"hipHostRegister") + \
    hip.umem_hip_double_attempts(b"hipHostUnregister")
for _ in range(50):
    r = lib.umem_torch_pluggable_malloc(SIZE, 0, STREAM)
    lib.umem_torch_pluggable_free(r, SIZE, 0, STREAM)
out["registrations_on_cached_path"] = hip.umem_hip_double_attempts(b"hipHostRegister") + \
    hip.umem_hip_double_attempts(b"hipHostUnregister") - before

# Memory umem did not allocate, aliased on the GPU: registered (with XNACK off, pinned) for the
# alias's life.
foreign = ctypes.create_string_buffer(3 * 4096)
out["foreign_access"] = json.loads(L.take_string(lib.umem_torch_gpu_access_json(foreign, 3 * 4096)))
handle = ctypes.c_void_p()
status = lib.umem_torch_alias_register(foreign, 3 * 4096, ctypes.byref(handle))
out["alias_status"] = status
out["alias_error"] = L.last_error() if status else ""
out["alias_known"] = hip.umem_hip_double_known(foreign)
if status == 0:
    out["alias_memset"] = hip.hipMemsetAsync(foreign, 1, 3 * 4096, STREAM)
    lib.umem_torch_alias_release(handle)
    out["alias_known_after_release"] = hip.umem_hip_double_known(foreign)
# A read-only map (np.load(mmap_mode="r")): KFD cannot pin it, so the alias is refused.
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
PROT_READ, MAP_PRIVATE, MAP_ANONYMOUS = 1, 2, 0x20
read_only = libc.mmap(None, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
status = lib.umem_torch_alias_register(ctypes.c_void_p(read_only), 4096, ctypes.byref(handle))
out["read_only_status"] = status
out["read_only_error"] = L.last_error() if status else ""
out["read_only_known"] = hip.umem_hip_double_known(ctypes.c_void_p(read_only))

# Freed and given back: unregistered before the pages go.
lib.umem_torch_pluggable_free(p, SIZE, 0, STREAM)
L.check(lib.umem_torch_host_free(host))
released = ctypes.c_size_t()
L.check(lib.umem_torch_empty_cache(1, ctypes.byref(released)))
out["released"] = released.value
out["known_after_empty_cache"] = [hip.umem_hip_double_known(p), hip.umem_hip_double_known(host)]
out["live_registrations"] = hip.umem_hip_double_live_registrations()
out["describe"] = L.take_string(lib.umem_torch_describe())
print(json.dumps(out))
