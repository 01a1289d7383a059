"""Builds and loads umem's two PyTorch allocator extensions against the installed PyTorch: "cuda",
the GPU allocator (umem_cuda_allocator.cpp, Note [Two allocators, one interface] there), and
"cpu", the CPU allocator (umem_cpu_allocator.cpp, Note [CPU allocator]), which builds against
CPU-only PyTorch too.

The sources and the headers they include sit in a folder named `extension` beside the loaded
libumem_torch.so (the build tree and the GPU bundle) or beside this package. The build is
torch.utils.cpp_extension's: a compiler and ninja are needed once; the result is cached in
TORCH_EXTENSIONS_DIR (PyTorch's variable; default ~/.cache/torch_extensions) under a name made of
its key: the sources' digest, PyTorch's version and its CUDA or ROCm version ("cpu" for the CPU
allocator, which uses no GPU header), so an edited source or another PyTorch builds anew and an
unchanged one is only loaded. On ROCm builds of PyTorch, cpp_extension hipifies the GPU one.

Built once, ahead of time: `python -m umem.torch build` (build() below) builds them for the
installed PyTorch and prints where they lie and their keys. load() then imports the built module
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

# kind -> its source file.
_SOURCES = {"cuda": "umem_cuda_allocator.cpp", "cpu": "umem_cpu_allocator.cpp"}
KINDS = tuple(_SOURCES)


def source_dir():
    """The folder holding the extension's source; FileNotFoundError naming where it looked."""
    here = os.path.dirname(os.path.abspath(__file__))
    lib_dir = os.path.dirname(os.path.abspath(_lib.library_path()))
    tried = [os.path.join(lib_dir, "extension"), os.path.join(here, "extension")]
    for d in tried:
        if all(os.path.isfile(os.path.join(d, s)) for s in _SOURCES.values()):
            return d
    raise FileNotFoundError("umem: the allocator extensions' sources "
                            + ", ".join(_SOURCES.values()) + " are in none of "
                            + ", ".join(tried) + " (build the umem_torch target, which puts it "
                            "beside libumem_torch.so)")


def _digest(folder):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            with open(os.path.join(root, f), "rb") as fh:
                h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def key(kind="cuda"):
    """{"torch", "runtime", "source"}: what the built extension of `kind` depends on."""
    import torch
    if kind == "cpu":
        return {"torch": torch.__version__, "runtime": "cpu", "source": _digest(source_dir())}
    if not getattr(torch.version, "hip", None) and not torch.version.cuda:
        raise RuntimeError(f"PyTorch {torch.__version__} is a CPU-only build: it has no GPU "
                           "allocator for umem's extension to replace")
    runtime = (f"rocm{torch.version.hip}" if getattr(torch.version, "hip", None)
               else f"cuda{torch.version.cuda}")
    return {"torch": torch.__version__, "runtime": runtime, "source": _digest(source_dir())}


def module_name(k=None, kind="cuda"):
    """The module name of extension `kind` for key `k` (this PyTorch's by default): a Python
    identifier."""
    k = k or key(kind)
    return re.sub(r"\W", "_", f"umem_{kind}_allocator_{k['source']}_torch{k['torch']}_{k['runtime']}")


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


def _build(name, kind, verbose=False):
    from torch.utils import cpp_extension
    # Built from a copy inside the build directory: on ROCm cpp_extension writes hipified files
    # beside the sources, and an installed package may be read-only. The folder itself is an
    # include path so that hipify converts the extension's own headers too (it converts only
    # headers it finds on the include paths).
    folder = os.path.join(build_directory(name), "source")
    shutil.copytree(source_dir(), folder, dirs_exist_ok=True)
    return cpp_extension.load(
        name=name,
        sources=[os.path.join(folder, _SOURCES[kind])],
        extra_include_paths=[os.path.join(folder, "include"), folder],
        extra_cflags=["-O2"],
        with_cuda=kind == "cuda",
        verbose=verbose)


def build(kind="cuda", verbose=False):
    """Builds extension `kind` for the installed PyTorch unless it is built already; returns
    (path of the module, key)."""
    k = key(kind)
    name = module_name(k, kind)
    if _import_built(name) is None:
        _build(name, kind, verbose)
    return os.path.join(build_directory(name), name + ".so"), k


_loaded = {}  # module name -> the module, installed


def load(kind="cuda"):
    """The built extension module of `kind` with libumem_torch.so's functions installed: the one
    built ahead of time when there is one, else built now. Raises what the build raises (no
    compiler, no ninja, a CPU-only PyTorch for "cuda") or FileNotFoundError."""
    name = module_name(kind=kind)
    if name in _loaded:
        return _loaded[name]
    module = sys.modules.get(name) or _import_built(name) or _build(name, kind)
    lib = _lib.lib()
    # Every function of the library: the extension takes the ones library_functions.hpp names.
    module.install({f: ctypes.cast(getattr(lib, f), ctypes.c_void_p).value
                    for f in _lib.SIGNATURES})
    _loaded[name] = module
    return module


def main(argv):
    """`python -m umem.torch build [--verbose] [cuda|cpu]`: both extensions by default; the GPU
    one only where PyTorch has a GPU build."""
    import torch
    options = [a for a in argv[1:] if a.startswith("-")]
    kinds = [a for a in argv[1:] if not a.startswith("-")]
    if not argv or argv[0] != "build" or any(o != "--verbose" for o in options) \
            or any(k not in KINDS for k in kinds):
        print("usage: python -m umem.torch build [--verbose] [cuda|cpu]", file=sys.stderr)
        return 2
    if not kinds:
        gpu = getattr(torch.version, "hip", None) or torch.version.cuda
        kinds = ["cuda", "cpu"] if gpu else ["cpu"]
    for kind in kinds:
        try:
            path, k = build(kind, verbose="--verbose" in options)
        except Exception as e:  # the build's own error says what is missing
            print(f"umem: the {kind} allocator extension cannot be built here: {e}",
                  file=sys.stderr)
            return 1
        print(f"umem {kind} allocator extension: {path}")
        print(f"key: PyTorch {k['torch']}, {k['runtime']}, source {k['source']}")
    return 0
