"""Builds and loads umem's PyTorch allocator extension (umem_cuda_allocator.cpp, Note [Two
allocators, one interface] there) against the installed PyTorch.

The source and the headers it includes sit in a folder named `extension` beside the loaded
libumem_torch.so (the build tree and the GPU bundle) or beside this package. The build is
torch.utils.cpp_extension's: a compiler and ninja are needed once; the result is cached in
TORCH_EXTENSIONS_DIR (PyTorch's variable; default ~/.cache/torch_extensions) under a name made of
its key: the source's digest, PyTorch's version and its CUDA or ROCm version, so an edited source
or another PyTorch builds anew and an unchanged one is only loaded. On ROCm builds of PyTorch,
cpp_extension hipifies the source.

Built once, ahead of time: `python -m umem.torch build` (build() below) builds it for the
installed PyTorch and prints where it lies and its key. load() then imports the built module
directly, without a compiler or ninja and without cpp_extension's build lock, so compute nodes
without compilers and many ranks starting at once neither build nor race. Where nothing was built
ahead, the first load() builds it (cpp_extension's lock makes concurrent ranks wait for one build).
"""
import ctypes
import hashlib
import importlib.util
import os
import re
import shutil
import sys

from . import _lib

_SOURCE = "umem_cuda_allocator.cpp"


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


def key():
    """{"torch", "runtime", "source"}: what the built extension depends on."""
    import torch
    if not getattr(torch.version, "hip", None) and not torch.version.cuda:
        raise RuntimeError(f"PyTorch {torch.__version__} is a CPU-only build: it has no GPU "
                           "allocator for umem's extension to replace")
    runtime = (f"rocm{torch.version.hip}" if getattr(torch.version, "hip", None)
               else f"cuda{torch.version.cuda}")
    return {"torch": torch.__version__, "runtime": runtime, "source": _digest(source_dir())}


def module_name(k=None):
    """The extension's module name for key `k` (this PyTorch's by default): a Python identifier."""
    k = k or key()
    return re.sub(r"\W", "_", f"umem_cuda_allocator_{k['source']}_torch{k['torch']}_{k['runtime']}")


def build_directory(name=None):
    """Where cpp_extension builds (and this module finds) the extension named `name`."""
    from torch.utils import cpp_extension
    return cpp_extension._get_build_directory(name or module_name(), verbose=False)


def _import_built(name):
    path = os.path.join(build_directory(name), name + ".so")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _build(name, verbose=False):
    from torch.utils import cpp_extension
    # Built from a copy inside the build directory: on ROCm cpp_extension writes hipified files
    # beside the sources, and an installed package may be read-only. The folder itself is an
    # include path so that hipify converts the extension's own headers too (it converts only
    # headers it finds on the include paths).
    folder = os.path.join(build_directory(name), "source")
    shutil.copytree(source_dir(), folder, dirs_exist_ok=True)
    return cpp_extension.load(
        name=name,
        sources=[os.path.join(folder, _SOURCE)],
        extra_include_paths=[os.path.join(folder, "include"), folder],
        extra_cflags=["-O2"],
        with_cuda=True,
        verbose=verbose)


def build(verbose=False):
    """Builds the extension for the installed PyTorch unless it is built already; returns
    (path of the module, key)."""
    k = key()
    name = module_name(k)
    if _import_built(name) is None:
        _build(name, verbose)
    return os.path.join(build_directory(name), name + ".so"), k


def load():
    """The built extension module with libumem_torch.so's functions installed: the one built
    ahead of time when there is one, else built now. Raises what the build raises (no compiler,
    no ninja, a CPU-only PyTorch) or FileNotFoundError."""
    name = module_name()
    module = sys.modules.get(name) or _import_built(name) or _build(name)
    lib = _lib.lib()
    # Every function of the library: the extension takes the ones its UMEM_FUNCTIONS list names.
    module.install({name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                    for name in _lib.SIGNATURES})
    return module


def main(argv):
    """`python -m umem.torch build [--verbose]`."""
    if not argv or argv[0] != "build" or any(a not in ("--verbose",) for a in argv[1:]):
        print("usage: python -m umem.torch build [--verbose]", file=sys.stderr)
        return 2
    try:
        path, k = build(verbose="--verbose" in argv)
    except Exception as e:  # the build's own error says what is missing
        print(f"umem: the allocator extension cannot be built here: {e}", file=sys.stderr)
        return 1
    print(f"umem allocator extension: {path}")
    print(f"key: PyTorch {k['torch']}, {k['runtime']}, source {k['source']}")
    return 0
