"""What a child process run on the HIP double needs first: the double mapped before anything else
(as PyTorch for ROCm maps libamdhip64 at import) and attached to the same ROCr double the bridge
uses, as HIP runs over ROCr; its control functions typed for ctypes."""
import ctypes

# hipMemoryType (hip_api.hpp of the double, HIP's hip_runtime_api.h).
MEMORY_TYPE_HOST = 1


class PointerAttributes(ctypes.Structure):
    """hipPointerAttribute_t as the double lays it out (tests/hip_double/hip_api.hpp)."""
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("device_pointer", ctypes.c_void_p), ("host_pointer", ctypes.c_void_p),
                ("is_managed", ctypes.c_int), ("allocation_flags", ctypes.c_uint)]


def attach(hip_path, rocr_path):
    """The HIP double, mapped globally and attached to the ROCr double at rocr_path."""
    hip = ctypes.CDLL(hip_path, mode=ctypes.RTLD_GLOBAL)
    for name in ("umem_hip_double_attempts", "umem_hip_double_calls",
                 "umem_hip_double_calls_on_this_thread"):
        getattr(hip, name).restype = ctypes.c_long
        getattr(hip, name).argtypes = [ctypes.c_char_p]
    hip.umem_hip_double_total_attempts.restype = ctypes.c_long
    hip.umem_hip_double_cpu_copies.restype = ctypes.c_long
    hip.umem_hip_double_known.argtypes = [ctypes.c_void_p]
    hip.umem_hip_double_attach_rocr.argtypes = [ctypes.c_char_p]
    hip.umem_hip_double_last_message.restype = ctypes.c_char_p
    hip.hipMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                   ctypes.c_void_p]
    hip.hipMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_int, ctypes.c_void_p]
    hip.hipPointerGetAttributes.argtypes = [ctypes.POINTER(PointerAttributes), ctypes.c_void_p]
    if hip.umem_hip_double_attach_rocr(rocr_path.encode()) != 0:
        raise SystemExit("attach_rocr: " + hip.umem_hip_double_last_message().decode())
    return hip


def is_pinned(hip, ptr):
    """What PyTorch for ROCm's Tensor.is_pinned() answers for ptr: CUDAHooks::isPinnedPtr
    (aten/src/ATen/cuda/detail/CUDAHooks.cpp, hipified) asks hipPointerGetAttributes and compares
    the type with hipMemoryTypeHost; Tensor.pin_memory() returns the tensor itself when it is
    pinned (aten/src/ATen/native/Memory.cpp)."""
    attributes = PointerAttributes()
    status = hip.hipPointerGetAttributes(ctypes.byref(attributes), ptr)
    return status == 0 and attributes.type == MEMORY_TYPE_HOST


def unregisters(hip):
    """Successful hipHostUnregister calls, in all and on the calling thread: which thread waited in
    them (clr's ihipHostUnregister waits for the device's streams; the double does not)."""
    return {"unregisters": hip.umem_hip_double_calls(b"hipHostUnregister"),
            "unregisters_on_this_thread":
                hip.umem_hip_double_calls_on_this_thread(b"hipHostUnregister")}

