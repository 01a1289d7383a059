#!/usr/bin/env python3
"""umem_bench_report on rounds (Note [Rounds] in bench/report.cpp): a benchmark found in several
files is reported as its fastest round; a round that failed counts only when every round failed;
a file's median aggregate is its value for that file.
Usage: report_rounds_test.py PATH_TO_umem_bench_report"""
import json
import os
import subprocess
import sys
import tempfile


def row(contender, size, ns, threads=1, error=None, aggregate=None):
    name = f"alloc_free/{contender}/size:{size}/real_time/threads:{threads}"
    b = {"name": name + (f"_{aggregate}" if aggregate else ""), "run_name": name,
         "run_type": "aggregate" if aggregate else "iteration", "threads": threads,
         "cpu_time": ns, "real_time": ns / threads, "time_unit": "ns"}
    if aggregate:
        b["aggregate_name"] = aggregate
    if error:
        b["error_occurred"] = True
        b["error_message"] = error
    return b


def write(d, name, rows):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump({"context": {"malloc": "glibc"}, "benchmarks": rows}, f)
    return path


def size_row(page, size_label):
    """The 1-thread single-size table's row for `size_label` ("256 B (small)"), as its cells."""
    table = page.split("## alloc+free of one size, 1 thread", 1)[1].split("\n## ", 1)[0]
    for line in table.splitlines():
        if line.startswith("| " + size_label + " |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {size_label!r} in:\n{table}")


def main():
    report = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        files = [
            write(d, "round1.json", [row("umem", 256, 21.0), row("glibc", 256, 9.0),
                                     row("umem", 4096, 30.0, error="out of memory"),
                                     row("glibc", 4096, 1.0, error="broken"),
                                     # a median aggregate wins over the file's iteration rows
                                     row("umem", 65536, 99.0), row("umem", 65536, 40.0, aggregate="median"),
                                     row("umem", 65536, 1.0, aggregate="mean")]),
            write(d, "round2.json", [row("umem", 256, 11.5), row("glibc", 256, 17.0),
                                     row("umem", 4096, 12.5), row("glibc", 4096, 2.0, error="broken"),
                                     row("umem", 65536, 44.0)]),
            write(d, "round3.json", [row("umem", 256, 19.0), row("glibc", 256, 8.5)]),
        ]
        out = os.path.join(d, "page.md")
        subprocess.run([report, "--out", out, *files], check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            page = f.read()
    cells = size_row(page, "256 B (small)")
    assert cells[1] == "11.5 ns", cells  # umem's fastest of 21.0, 11.5, 19.0
    assert cells[3].startswith("8.50 ns"), cells  # glibc's fastest of 9.0, 17.0, 8.5
    cells = size_row(page, "4 KiB (small)")
    assert cells[1] == "12.5 ns", cells  # round 1 failed, round 2 did not
    assert cells[3].startswith("error: broken"), cells  # failed in every round
    cells = size_row(page, "64 KiB (large)")
    assert cells[1] == "40.0 ns", cells  # round 1's median (not its mean), faster than 44.0
    print("report rounds: ok")


if __name__ == "__main__":
    main()
