"""The `umtopo` console command of the installed package: runs the umtopo binary installed in
the package (bin/umtopo) with the same arguments."""
import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "umtopo")
    if not os.access(binary, os.X_OK):
        sys.exit(f"umtopo: {binary} is missing; this umem package was not installed with "
                 "`pip install .` (run the umtopo built in the CMake build tree instead)")
    os.execv(binary, [binary] + sys.argv[1:])
