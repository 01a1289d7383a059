"""Builds and loads umem's PyTorch allocator extension (umem_cuda_allocator.cpp, Note [Two
allocators, one interface] there) against the installed PyTorch.

The source and the headers it includes sit in a folder named `extension` beside the loaded
libumem_torch.so (the build tree and the GPU bundle) or beside this package. The build is
torch.utils.cpp_extension's: a compiler and ninja are needed once; the result is cached in
TORCH_EXTENSIONS_DIR (PyTorch's variable; default ~/.cache/torch_extensions) under a name that
changes with the source, so an edited source is rebuilt and an unchanged one is only loaded.
On ROCm builds of PyTorch, cpp_extension hipifies the source.
"""
import ctypes
import hashlib
import os

from . import _lib

_SOURCE = "umem_cuda_allocator.cpp"

# Every libumem_torch.so function the extension calls (its UMEM_FUNCTIONS list).
FUNCTIONS = ("umem_torch_alloc", "umem_torch_release", "umem_torch_record_stream",
             "umem_torch_owns", "umem_torch_segment_alloc", "umem_torch_segment_free",
             "umem_torch_set_external_reserved",
             "umem_torch_capture_begin", "umem_torch_capture_end", "umem_torch_get_device_stats",
             "umem_torch_reset_peak_stats", "umem_torch_reset_accumulated_stats",
             "umem_torch_empty_cache", "umem_torch_set_memory_fraction",
             "umem_torch_get_memory_fraction", "umem_torch_mem_get_info",
             "umem_torch_visit_segments", "umem_torch_set_event_provider",
             "umem_torch_last_error")


def source_dir():
    """The folder holding the extension's source; FileNotFoundError naming where it looked."""
    here = os.path.dirname(os.path.abspath(__file__))
    lib_dir = os.path.dirname(os.path.abspath(_lib.library_path()))
    tried = [os.path.join(lib_dir, "extension"), os.path.join(here, "extension")]
    for d in tried:
        if os.path.isfile(os.path.join(d, _SOURCE)):
            return d
    raise FileNotFoundError(f"umem: the allocator extension's source {_SOURCE} is in none of "
                            + ", ".join(tried) + " (build the umem_torch target, which puts it "
                            "beside libumem_torch.so)")


def _digest(folder):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            with open(os.path.join(root, f), "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def load():
    """The built extension module with libumem_torch.so's functions installed. Raises what the
    build raises (no compiler, no ninja, a CPU-only PyTorch) or FileNotFoundError."""
    from torch.utils import cpp_extension
    folder = source_dir()
    module = cpp_extension.load(
        name="umem_cuda_allocator_" + _digest(folder),
        sources=[os.path.join(folder, _SOURCE)],
        extra_include_paths=[os.path.join(folder, "include")],
        extra_cflags=["-O2"],
        with_cuda=True,
        verbose=False)
    lib = _lib.lib()
    module.install({name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                    for name in FUNCTIONS})
    return module
