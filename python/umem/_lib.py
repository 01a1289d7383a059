"""Loading libumem_torch.so through ctypes and calling it with umem's error contract.

The library is found, in order: the path in the environment variable UMEM_TORCH_LIBRARY; a
libumem_torch.so beside this file (an installed or build-tree package); the default library
search path. Python code reads UMEM_TORCH_LIBRARY itself; the C++ library never does.
"""
import ctypes
import json
import os
import threading

_lock = threading.Lock()
_lib = None


def hold_across_fork(*locks):
    """Takes `locks` (in this order) before os.fork() and releases them after it in the parent and
    the child, so that a child never starts with one of them held by a thread it does not have
    (the library's own locks are handled by the library: Note [Fork] in fork_safety.hpp)."""
    def take():
        for lock in locks:
            lock.acquire()

    def release():
        for lock in reversed(locks):
            lock.release()
    os.register_at_fork(before=take, after_in_parent=release, after_in_child=release)


hold_across_fork(_lock)

UMEM_OK = 0
UMEM_ERR_OUT_OF_MEMORY = 2
UMEM_ERR_ALREADY_INITIALIZED = 6


class UmemError(RuntimeError):
    """A umem call failed; `status` is the umem_status name."""

    def __init__(self, status, message):
        super().__init__(f"{message} [{status}]")
        self.status = status


def library_path():
    """The path the library is (or would be) loaded from."""
    env = os.environ.get("UMEM_TORCH_LIBRARY")
    if env:
        return env
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libumem_torch.so")
    return beside if os.path.exists(beside) else "libumem_torch.so"


# Every function of libumem_torch.so: (result, argument types). umem_torch.h is the ABI's one list;
# tests/python/test_abi.py fails naming any function this table lacks, adds or types otherwise.
_c = ctypes
SIGNATURES = {
    "umem_torch_init": (_c.c_int, [_c.c_char_p]),
    "umem_torch_pluggable_malloc": (_c.c_void_p, [_c.c_ssize_t, _c.c_int, _c.c_void_p]),
    "umem_torch_pluggable_free": (None, [_c.c_void_p, _c.c_ssize_t, _c.c_int, _c.c_void_p]),
    "umem_torch_set_oom_exceptions": (None, [_c.c_int]),
    "umem_torch_host_malloc": (_c.c_int, [_c.c_size_t, _c.c_int, _c.POINTER(_c.c_void_p)]),
    "umem_torch_host_free": (_c.c_int, [_c.c_void_p]),
    "umem_torch_host_record_use": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.c_int]),
    "umem_torch_empty_cache": (_c.c_int, [_c.c_int, _c.POINTER(_c.c_size_t)]),
    "umem_torch_set_memory_fraction": (_c.c_int, [_c.c_double, _c.c_int]),
    "umem_torch_mem_get_info": (_c.c_int, [_c.c_int, _c.POINTER(_c.c_size_t),
                                           _c.POINTER(_c.c_size_t)]),
    "umem_torch_memory_stats_json": (_c.c_void_p, [_c.c_int]),
    "umem_torch_reset_peak_stats": (_c.c_int, [_c.c_int]),
    "umem_torch_gpu_access_json": (_c.c_void_p, [_c.c_void_p, _c.c_size_t]),
    "umem_torch_alias_register": (_c.c_int, [_c.c_void_p, _c.c_size_t, _c.POINTER(_c.c_void_p)]),
    "umem_torch_alias_release": (_c.c_int, [_c.c_void_p]),
    "umem_torch_residency_json": (_c.c_void_p, [_c.c_void_p, _c.c_size_t]),
    "umem_torch_topology_json": (_c.c_void_p, [_c.c_char_p]),
    "umem_torch_checkpoint_json": (_c.c_void_p, [_c.c_char_p]),
    "umem_torch_load_safetensors_json": (_c.c_void_p, [_c.c_char_p, _c.c_int, _c.c_uint, _c.c_int]),
    "umem_torch_safetensors_layout_json": (_c.c_void_p, [_c.c_char_p]),
    "umem_torch_read_file": (_c.c_int, [_c.c_char_p, _c.c_uint64, _c.c_uint64, _c.c_void_p,
                                        _c.c_int, _c.c_uint, _c.c_int]),
    "umem_torch_device_json": (_c.c_void_p, [_c.c_int]),
    "umem_torch_rank_binding_json": (_c.c_void_p, [_c.c_char_p, _c.c_int, _c.c_int]),
    "umem_torch_set_memory_policy": (_c.c_int, [_c.c_int, _c.c_char_p]),
    "umem_torch_set_event_provider": (_c.c_int, [_c.c_void_p]),
    "umem_torch_get_memory_fraction": (_c.c_int, [_c.c_int, _c.POINTER(_c.c_double)]),
    "umem_torch_extension_alloc": (_c.c_int, [_c.c_size_t, _c.c_int, _c.c_void_p,
                                             _c.POINTER(_c.c_void_p)]),
    "umem_torch_extension_release": (_c.c_int, [_c.c_void_p]),
    "umem_torch_record_stream": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "umem_torch_owns": (_c.c_int, [_c.c_void_p]),
    "umem_torch_segment_alloc": (_c.c_int, [_c.c_size_t, _c.c_int, _c.POINTER(_c.c_void_p)]),
    "umem_torch_segment_free": (_c.c_int, [_c.c_void_p]),
    "umem_torch_set_external_reserved": (_c.c_int, [_c.c_int, _c.c_uint64]),
    "umem_torch_capture_begin": (None, []),
    "umem_torch_capture_end": (None, []),
    "umem_torch_get_device_stats": (_c.c_int, [_c.c_int, _c.c_void_p]),
    "umem_torch_reset_accumulated_stats": (_c.c_int, [_c.c_int]),
    "umem_torch_visit_segments": (_c.c_int, [_c.c_int, _c.c_void_p, _c.c_void_p]),
    "umem_torch_describe": (_c.c_void_p, []),
    "umem_torch_string_free": (None, [_c.c_void_p]),
    "umem_torch_last_error": (_c.c_char_p, []),
    "umem_torch_last_status": (_c.c_int, []),
}


def _declare(lib):
    for name, (res, args) in SIGNATURES.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


def lib():
    """The loaded library (loaded once). Raises OSError naming the path and UMEM_TORCH_LIBRARY."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                loaded = ctypes.CDLL(path)
            except OSError as e:
                raise OSError(
                    f"umem: cannot load the torch bridge library '{path}' ({e}); build the "
                    "umem_torch target or set UMEM_TORCH_LIBRARY to its path") from e
            _declare(loaded)
            _lib = loaded
        return _lib


_STATUS = {0: "UMEM_OK", 1: "UMEM_ERR_INVALID_ARGUMENT", 2: "UMEM_ERR_OUT_OF_MEMORY",
           3: "UMEM_ERR_NOT_FOUND", 4: "UMEM_ERR_RUNTIME", 5: "UMEM_ERR_UNSUPPORTED",
           6: "UMEM_ERR_ALREADY_INITIALIZED", 7: "UMEM_ERR_INTERNAL"}


def last_error():
    return lib().umem_torch_last_error().decode(errors="replace")


def error(status=None):
    """The UmemError for the calling thread's last failure."""
    if status is None:
        status = lib().umem_torch_last_status()
    return UmemError(_STATUS.get(status, str(status)), last_error())


def check(status):
    if status != UMEM_OK:
        raise error(status)


def take_string(ptr):
    """Copies and frees a string the library returned; raises on NULL."""
    if not ptr:
        raise error()
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        lib().umem_torch_string_free(ptr)


def take_json(ptr):
    return json.loads(take_string(ptr))
