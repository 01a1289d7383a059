"""Includes point one way (README.md, "Layers"; the top CMakeLists.txt).

Between the top-level layers: core at the bottom; importers, hsa_runtime, cuda_runtime,
hip_runtime, numa and weights on core; machine (which GPU runtime the process has, and what it
reports) on the runtimes and numa; allocator on machine; torch_bridge on the allocator; umtopo
learns the machine from machine/ and takes from the allocator only its options table
(alloc_config.hpp, for --options).

Inside the allocator (README.md, "The allocator"): source/ (memory sources) uses only the
vocabulary headers; gpu/ adds source/ and machine/; the caching pool (src/pool/, include
detail/pool/) adds source/ but never gpu/ or machine/; the front end (the top level) may use
everything. Vocabulary: placement.hpp, pool_stats.hpp, reclaim_report.hpp (what the pool's
reclaim ladder did, which the front end's requests carry) and fork_safety.hpp (with its
detail/fork_guard.hpp: every layer's locks register for fork()).

Exit 1 naming each include that points the wrong way."""
import os
import re
import sys

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUNTIMES = {"core", "hsa_runtime", "cuda_runtime", "hip_runtime", "numa"}
# folder: the layers its files may include (besides its own)
TOP = {"core": set(),
       "importers": {"core"},
       "hsa_runtime": {"core"},
       "cuda_runtime": {"core"},
       "hip_runtime": {"core"},
       "numa": {"core"},
       "weights": {"core"},
       "machine": RUNTIMES,
       "allocator": RUNTIMES | {"machine"},
       "torch_bridge": RUNTIMES | {"machine", "allocator", "weights"},
       os.path.join("tools", "umtopo"): RUNTIMES | {"importers", "machine", "allocator"}}
# Of the allocator, umtopo may include only this (the options table).
UMTOPO = os.path.join("tools", "umtopo")
UMTOPO_ALLOCATOR = {"alloc_config.hpp"}
TOP_INCLUDE = re.compile(r'#include "umem/(\w+)/([\w/]+\.hpp)"')

ALLOCATOR = os.path.join(REPO, "allocator")
VOCABULARY = {"placement.hpp", "pool_stats.hpp", "reclaim_report.hpp", "fork_safety.hpp",
              "detail/fork_guard.hpp"}
# layer: (header folder, source folder, allocator layers it may include, top-level layers above
# the allocator's own dependencies it may include)
INNER = {"source": ("source", "source", set(), set()),
         "gpu": ("gpu", "gpu", {"source"}, {"machine"}),
         "pool": ("detail/pool", "pool", {"source"}, set())}


def sources(folder):
    for base, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith((".hpp", ".cpp", ".h")):
                yield os.path.join(base, f)


def includes(path):
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = TOP_INCLUDE.search(line)
        if m:
            yield n, m.group(1), m.group(2)


def top_level(bad):
    for layer, allowed in TOP.items():
        for path in sources(os.path.join(REPO, layer)):
            for n, target, header in includes(path):
                ok = target in allowed | {layer}
                if layer == UMTOPO and target == "allocator":
                    ok = header in UMTOPO_ALLOCATOR
                if not ok:
                    bad.append(f"{os.path.relpath(path, REPO)}:{n}: {layer} includes "
                               f"umem/{target}/{header}")


def inner_layer_of(header):
    for name, (folder, _, _, _) in INNER.items():
        if header.startswith(folder + "/"):
            return name
    return "vocabulary" if header in VOCABULARY else "front"


def allocator_inner(bad):
    for name, (inc, src, allowed, above) in INNER.items():
        for folder in (os.path.join(ALLOCATOR, "include", "umem", "allocator", inc),
                       os.path.join(ALLOCATOR, "src", src)):
            for f in sorted(os.listdir(folder)):
                path = os.path.join(folder, f)
                if not os.path.isfile(path):
                    continue
                for n, target, header in includes(path):
                    if target == "allocator":
                        inner = inner_layer_of(header)
                        if inner not in allowed | {name, "vocabulary"}:
                            bad.append(f"{os.path.relpath(path, REPO)}:{n}: allocator {name} "
                                       f"includes {header} ({inner})")
                    elif target not in RUNTIMES | above:
                        bad.append(f"{os.path.relpath(path, REPO)}:{n}: allocator {name} "
                                   f"includes umem/{target}/{header}")


def main():
    bad = []
    top_level(bad)
    allocator_inner(bad)
    for b in bad:
        print("layers:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
