#!/usr/bin/env python3
"""bench/plot_results.py on small fixtures: Google Benchmark JSON, the generated page's table and
training.py's table give SVGs with the expected series, labels and points."""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "plot_results.py")
NS = "{http://www.w3.org/2000/svg}"


def run(*args):
    subprocess.run([sys.executable, SCRIPT, *args], check=True, stdout=subprocess.DEVNULL)


def series(svg_path):
    """The drawing's series names, texts and point titles."""
    root = ET.parse(svg_path).getroot()
    texts = [t.text for t in root.iter(NS + "text")]
    found = {e.get("data-series") for e in root.iter() if e.get("class") == "series"}
    titles = [t.text for t in root.iter(NS + "title")]
    return found, texts, titles


def draw_from_text(d, kind, text, *options):
    """Draws `kind` from a markdown file holding `text`; the drawing's series, texts and titles."""
    source, out = os.path.join(d, kind + ".md"), os.path.join(d, kind + ".svg")
    with open(source, "w") as f:
        f.write(text)
    run(kind, "--out", out, *options, source)
    return series(out)


def bench(name, size, ns, median):
    b = {"name": f"alloc_free/{name}/size:{size}/real_time/threads:1" + ("_median" if median else ""),
         "run_type": "aggregate" if median else "iteration", "cpu_time": ns, "time_unit": "ns"}
    if median:
        b["aggregate_name"] = "median"
    return b


def main():
    with tempfile.TemporaryDirectory() as d:
        main_json = os.path.join(d, "main.json")
        with open(main_json, "w") as f:
            json.dump({"benchmarks": [
                bench("umem", 256, 13.0, True), bench("umem", 65536, 15.0, True),
                {**bench("umem", 256, 99.0, True), "name": "alloc_free/umem/size:256/real_time/threads:1_mean",
                 "aggregate_name": "mean"},
                bench("glibc", 256, 12.0, True), bench("glibc", 65536, 22.0, True),
                bench("umem", 256, 50.0, False) | {"name": "alloc_free/umem/size:256/real_time/threads:2"},
            ]}, f)
        mi_json = os.path.join(d, "mimalloc.json")
        with open(mi_json, "w") as f:
            json.dump({"benchmarks": [bench("mimalloc", 256, 12.5, False),
                                      bench("mimalloc", 65536, 2000.0, False)]}, f)
        out = os.path.join(d, "sizes.svg")
        run("alloc-sizes", "--out", out, main_json, mi_json)
        found, texts, titles = series(out)
        assert found == {"umem", "glibc", "mimalloc"}, found
        assert {"umem", "glibc malloc", "mimalloc"} <= set(texts), texts
        assert "256 B" in texts and "64 KiB" in texts, texts
        assert "umem 256 B: 13 ns" in titles, titles  # the median, not the mean or 2 threads
        assert "mimalloc 64 KiB: 2e+03 ns" in titles, titles

        found, texts, titles = draw_from_text(
            d, "alloc-sizes",
            "# x\n\n## alloc+free of one size, 1 thread\n\n"
            "| size | umem | umem locked path* | glibc malloc | jemalloc | mimalloc |\n"
            "|---|---:|---:|---:|---:|---:|\n"
            "| 256 B (small) | 13.2 ns | 86.8 ns (6.6x) | 13.1 ns (0.99x) | 10.6 ns (0.80x) | n/a |\n"
            "| 64 MiB (large) | 16.1 ns | 73.7 ns (4.6x) | 9.71 µs (604x) | 6.39 µs (397x) | n/a |\n\n"
            "## next\n", "--from-markdown")
        assert found == {"umem", "glibc", "jemalloc"}, found  # mimalloc n/a: no series
        assert "glibc malloc 64 MiB: 9.71e+03 ns" in titles, titles

        found, texts, titles = draw_from_text(
            d, "step-ratios",
            "| workload | rounds | umem / PyTorch step in lockstep [95% interval] (<= 1.02) | "
            "control / PyTorch step in lockstep |\n|---|---|---|---|\n"
            "| gpt2 | 21 | 1.007 [1.004, 1.009] ok | 0.999 [0.997, 1.003], margin 0.003 |\n"
            "| resnet50 | 21 | 0.994 [0.991, 0.996] ok | 1.001 [0.999, 1.003], margin 0.003 |\n")
        assert found == {"umem", "control"}, found
        assert "gpt2" in texts and "resnet50" in texts and "target 1.02" in texts, texts
        assert "gpt2 umem: 1.007 [1.004, 1.009]" in titles, titles
        assert "resnet50 control: 1.001 [0.999, 1.003]" in titles, titles
    print("plot_results: ok")


if __name__ == "__main__":
    main()
