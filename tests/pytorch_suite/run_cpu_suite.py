"""PyTorch's own CPU tests against umem as PyTorch's CPU allocator: each test file runs twice,
with PyTorch's allocator (the base) and with umem.torch.enable_host() called before any test
(the pytest plugin umem_host_register.py), each in its own pytest process; the claim is about the
tests the base passes: each of them passes with umem too. Exit status 1 where one does not.

The tests are those of the PyTorch that runs them: the Debian source package of the installed
python3-torch (its .dsc and upstream tarball from Debian's pool; nothing of it is kept in the
repository), extracted to a work folder; or, with --tests, the test/ folder of a PyTorch checkout
of the installed release (any PyTorch, Debian's or not).

    python3 tests/pytorch_suite/run_cpu_suite.py [--work DIR] [--tests DIR] [TEST_FILE ...]
    # default files: DEFAULT_FILES below; from the repository root, with
    # UMEM_TORCH_LIBRARY and python/ on PYTHONPATH as for the Python tests

UMEM_DEBIAN_MIRROR: the Debian mirror (default http://deb.debian.org/debian)."""
import argparse
import collections
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
# CPU tensors made, viewed, indexed, saved and loaded, and sent to DataLoader workers and other
# processes (fork, shared memory).
DEFAULT_FILES = ("test_torch.py", "test_tensor_creation_ops.py", "test_view_ops.py",
                 "test_indexing.py", "test_serialization.py", "test_dataloader.py",
                 "test_multiprocessing.py")
# torch.testing._internal imports expecttest, which Debian 12 does not package; the tests here
# need only its TestCase base and ACCEPT flag.
EXPECTTEST = '''import unittest
ACCEPT = False
class TestCase(unittest.TestCase):
    longMessage = True
    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(str(actual).strip(), str(expect).strip())
'''


def installed_source():
    """(source package, version without epoch) of the installed python3-torch."""
    out = subprocess.run(["dpkg-query", "-W", "-f=${source:Package} ${source:Version}",
                          "python3-torch"], capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        sys.exit("run_cpu_suite: python3-torch is not installed as a Debian package "
                 f"({out.stderr.strip() or 'dpkg-query found nothing'})")
    package, version = out.stdout.split()
    return package, version.split(":", 1)[-1]


def fetch_tests(work, files):
    """Downloads and extracts the test files of the installed PyTorch; their folder."""
    package, version = installed_source()
    tests = os.path.join(work, f"{package}-{version}", "test")
    if all(os.path.exists(os.path.join(tests, f)) for f in files):
        return tests
    mirror = os.environ.get("UMEM_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    pool = f"{mirror}/pool/main/{package[0]}/{package}"
    try:
        with urllib.request.urlopen(f"{pool}/{package}_{version}.dsc", timeout=60) as r:
            dsc = r.read().decode()
        orig = next(m[1] for m in re.finditer(r"^ \S+ \d+ (\S+\.orig\.tar\.\w+)$", dsc, re.M))
        tarball = os.path.join(work, orig)
        if not os.path.exists(tarball):
            urllib.request.urlretrieve(f"{pool}/{orig}", tarball + ".part")
            os.replace(tarball + ".part", tarball)
    except (OSError, StopIteration) as e:
        sys.exit(f"run_cpu_suite: cannot get PyTorch {version}'s source from {pool}: {e}")
    with tarfile.open(tarball) as t:
        wanted = [m for m in t.getmembers()
                  if m.isfile() and os.path.basename(m.name) in files
                  and os.path.basename(os.path.dirname(m.name)) == "test"
                  and m.name.count("/") == 2]
        missing = set(files) - {os.path.basename(m.name) for m in wanted}
        if missing:
            sys.exit(f"run_cpu_suite: {orig} has no test/{', test/'.join(sorted(missing))}")
        os.makedirs(tests, exist_ok=True)
        for m in wanted:
            with t.extractfile(m) as src, open(os.path.join(tests, os.path.basename(m.name)),
                                               "wb") as dst:
                dst.write(src.read())
    return tests


def outcomes(path):
    """{test: passed | failed | skipped} of a pytest JUnit XML file."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        tags = {child.tag for child in case}
        out[f"{case.get('classname')}::{case.get('name')}"] = (
            "failed" if tags & {"failure", "error"} else
            "skipped" if "skipped" in tags else "passed")
    return out


def run(tests, test_file, umem, work):
    """One pytest process over `test_file`; its outcomes."""
    side = "umem" if umem else "base"
    xml = os.path.join(work, f"{os.path.splitext(test_file)[0]}-{side}.xml")
    env = dict(os.environ, UMEM_HOST="1" if umem else "0")
    # pytest runs in the tests' folder: the caller's relative entries (python/) made absolute.
    env["PYTHONPATH"] = os.pathsep.join(
        [HERE, os.path.join(work, "modules")]
        + [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    with open(xml[:-4] + ".log", "w") as log:
        subprocess.run([sys.executable, "-m", "pytest", "-p", "umem_host_register",
                        "-p", "no:cacheprovider", "-q", "-rfE", test_file, f"--junitxml={xml}"],
                       cwd=tests, env=env, stdout=log, stderr=subprocess.STDOUT)
    if not os.path.exists(xml):
        sys.exit(f"run_cpu_suite: pytest wrote no results for {test_file} ({side}); see "
                 f"{xml[:-4]}.log")
    return outcomes(xml)


def report(test_file, base, umem):
    """Prints the comparison of one file; the tests the base passes and umem does not."""
    print(f"## {test_file}")
    for name, runs in (("PyTorch's allocator", base), ("umem", umem)):
        counts = collections.Counter(runs.values())
        print(f"{name}: " + ", ".join(f"{counts[k]} {k}" for k in ("passed", "failed", "skipped")))
    passed = [t for t, o in base.items() if o == "passed"]
    lost = sorted(t for t in passed if umem.get(t) != "passed")
    print(f"passing with umem, of those PyTorch's allocator passes: {len(passed) - len(lost)} of "
          f"{len(passed)}")
    for t in lost:
        print(f"  not with umem: {t} ({umem.get(t, 'not run')})")
    for t in sorted(t for t, o in umem.items() if o == "passed" and base.get(t) != "passed"):
        print(f"  only with umem: {t}")
    return lost


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", help="folder for the source and the results (default: a new one)")
    p.add_argument("--tests", help="PyTorch's test/ folder of the installed release, instead of "
                   "Debian's source package")
    p.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    a = p.parse_args()
    work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="umem-pytorch-suite-"))
    os.makedirs(os.path.join(work, "modules"), exist_ok=True)
    try:
        import expecttest  # noqa: F401
    except ImportError:
        with open(os.path.join(work, "modules", "expecttest.py"), "w") as f:
            f.write(EXPECTTEST)
    tests = os.path.abspath(a.tests) if a.tests else fetch_tests(work, a.files)
    missing = [f for f in a.files if not os.path.exists(os.path.join(tests, f))]
    if missing:
        sys.exit(f"run_cpu_suite: {tests} has no {', '.join(missing)}")
    import torch
    print(f"PyTorch {torch.__version__}, tests of {tests}")
    lost = []
    for f in a.files:
        lost += report(f, run(tests, f, False, work), run(tests, f, True, work))
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
