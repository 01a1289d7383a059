"""The allocator's folders are layers, and includes point one way (README.md, "The allocator"):
source/ (memory sources) uses only the vocabulary headers; gpu/ adds source/; the caching pool
(src/pool/, include detail/pool/) adds source/ but never gpu/; the front end (the top level)
may use everything. Vocabulary: placement.hpp, pool_stats.hpp and fork_safety.hpp (with its
detail/fork_guard.hpp: every layer's locks register for fork()). Exit 1 naming each include
that points the wrong way."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "allocator")
VOCABULARY = {"placement.hpp", "pool_stats.hpp", "fork_safety.hpp", "detail/fork_guard.hpp"}
# layer: (header folder, source folder, layers it may include)
LAYERS = {"source": ("source", "source", set()),
          "gpu": ("gpu", "gpu", {"source"}),
          "pool": ("detail/pool", "pool", {"source"})}
INCLUDE = re.compile(r'#include "umem/allocator/([a-z_/]+\.hpp)"')


def layer_of(header):
    for name, (folder, _, _) in LAYERS.items():
        if header.startswith(folder + "/"):
            return name
    return "vocabulary" if header in VOCABULARY else "front"


def main():
    bad = []
    for name, (inc, src, allowed) in LAYERS.items():
        for folder in (os.path.join(ROOT, "include", "umem", "allocator", inc),
                       os.path.join(ROOT, "src", src)):
            for f in sorted(os.listdir(folder)):
                path = os.path.join(folder, f)
                if not os.path.isfile(path):
                    continue
                for n, line in enumerate(open(path), 1):
                    m = INCLUDE.search(line)
                    if not m:
                        continue
                    target = layer_of(m.group(1))
                    if target not in allowed | {name, "vocabulary"}:
                        bad.append(f"{os.path.relpath(path, ROOT)}:{n}: {name} includes "
                                   f"{m.group(1)} ({target})")
    for b in bad:
        print("allocator layers:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
