#!/usr/bin/env python3
"""Checks the file:line references of a walk through the code (Note [Where a PyTorch allocation
goes] and its copy in docs/torch-bridge.md): every reference is written `name (path:line)` and
line `line` of `path` names `name` (its last component: `bridge::allocate` -> `allocate`). Lines
move with every edit; this keeps the walk true.

Usage: check_line_references.py [--fix] FILE...   (paths relative to the repository root)
A bare file name (`bridge.cpp:301`) means the one file of that name in the repository.
--fix moves each stale number to the nearest line that names the symbol and rewrites FILE.
Exit 0: all references hold; 1: a reference is stale, or the word before it is no name on its line
(each one is printed)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# `name` then `(`, an optional backtick, then path:line; `//` and line breaks may stand between.
REF = re.compile(r"([A-Za-z_][\w:.>-]*(?:\(\))?)((?:\s|//)*)\(`?((?:[\w]+/)*[\w]+\.(?:cpp|hpp|h|py)):(\d+)")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def resolve(path, files):
    if "/" in path:
        return path if path in files else None
    named = [f for f in files if os.path.basename(f) == path]
    return named[0] if len(named) == 1 else None


def symbol_of(name):
    return re.split(r"::|\.|->", name.removesuffix("()"))[-1]


def check(doc, files, fix):
    text = open(os.path.join(ROOT, doc)).read()
    problems = []
    edits = []
    for m in REF.finditer(text):
        name, path, line = m.group(1), m.group(3), int(m.group(4))
        target = resolve(path, files)
        if target is None:
            problems.append(f"{doc}: {path} is not one file of the repository")
            continue
        lines = open(os.path.join(ROOT, target)).read().split("\n")
        sym = symbol_of(name)
        if 1 <= line <= len(lines) and sym in lines[line - 1]:
            continue
        near = [i + 1 for i, l in enumerate(lines) if sym in l]
        if fix and near:
            best = min(near, key=lambda i: abs(i - line))
            edits.append((m.start(4), m.end(4), str(best)))
            continue
        problems.append(f"{doc}: {name} ({path}:{line}): line {line} does not name {sym}"
                        + (f"; it is named at line(s) {near[:5]}" if near else "; the file never names it"))
    for begin, end, value in sorted(edits, reverse=True):
        text = text[:begin] + value + text[end:]
    if edits:
        open(os.path.join(ROOT, doc), "w").write(text)
    return problems, len(edits)


def main(argv):
    fix = "--fix" in argv
    docs = [a for a in argv if a != "--fix"]
    if not docs:
        print(__doc__)
        return 2
    files = set(tracked_files())
    problems = []
    for doc in docs:
        p, fixed = check(doc, files, fix)
        problems += p
        if fixed:
            print(f"{doc}: moved {fixed} line number(s)")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
