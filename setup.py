"""Builds the native parts of the `umem` Python package with CMake (pyproject.toml has the
metadata). The version is CMakeLists.txt's project version, the one version number of umem.

Environment: UMEM_CMAKE_ARGS (more -D options for the configure step), UMEM_BUILD_JOBS (parallel
build jobs, default: the CPUs this process may use)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(umem VERSION ([0-9.]+)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt has no `project(umem VERSION x.y.z ...)`")
    return m.group(1)


class build_native(build_py):
    """build_py, then libumem_torch.so (with the extensions' source beside it) and umtopo, put
    into the package, and the allocator extensions for the installing Python's PyTorch."""

    def run(self):
        super().run()
        if shutil.which("cmake") is None:
            raise RuntimeError("umem: building the package needs cmake (Debian: apt install "
                               "cmake; see scripts/install-deps.sh for the libraries)")
        build = os.path.join(ROOT, "build", "pip")
        configure = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DUMEM_BUILD_TESTS=OFF", "-DUMEM_BUILD_BENCHMARKS=OFF"]
        configure += shlex.split(os.environ.get("UMEM_CMAKE_ARGS", ""))
        jobs = os.environ.get("UMEM_BUILD_JOBS", str(len(os.sched_getaffinity(0))))
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", build, "-j", jobs, "--target", "umem_torch",
                        "umtopo"], check=True)
        package = os.path.join(self.build_lib, "umem")
        built = os.path.join(build, "python", "umem")
        shutil.copy2(os.path.join(built, "libumem_torch.so"), package)
        shutil.copytree(os.path.join(built, "extension"), os.path.join(package, "extension"),
                        dirs_exist_ok=True)
        os.makedirs(os.path.join(package, "bin"), exist_ok=True)
        shutil.copy2(os.path.join(build, "tools", "umtopo", "umtopo"),
                     os.path.join(package, "bin", "umtopo"))
        self.build_torch_extension()

    def build_torch_extension(self):
        """Where the installing Python has PyTorch, builds umem's allocator extensions for it now
        (python -m umem.torch build: the CPU one always, the GPU one where PyTorch has a GPU
        build), so that no rank builds them later and compute nodes need no compiler. A failure is
        reported, not fatal: enable() and enable_host() build on first use instead."""
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        if probe.returncode != 0:
            print("umem: no PyTorch in this Python; the allocator extensions are built on first "
                  "use (or later with `python -m umem.torch build`)")
            return
        env = dict(os.environ, PYTHONPATH=self.build_lib,
                   UMEM_TORCH_LIBRARY=os.path.join(self.build_lib, "umem", "libumem_torch.so"))
        built = subprocess.run([sys.executable, "-m", "umem.torch", "build"], env=env)
        if built.returncode != 0:
            print("umem: the allocator extensions were not built now (above); they are built on "
                  "first use")


class native_distribution(Distribution):
    """The wheel holds native code: tagged for this platform, never `any`."""

    def has_ext_modules(self):
        return True


setup(version=version(), cmdclass={"build_py": build_native}, distclass=native_distribution)
