#!/usr/bin/env python3
"""Draws the pictures of docs/results.md as SVG, with Python's standard library only.

  plot_results.py alloc-sizes --out F.svg RESULT.json...   time per size, 1 thread: umem against
      glibc malloc, jemalloc and mimalloc, from Google Benchmark JSON files of bench/umem_bench
      (what bench/run-benchmarks.sh leaves in its results folder); CPU time, the median where
      the file has aggregates.
  plot_results.py alloc-sizes --out F.svg --from-markdown docs/benchmarks.md
      the same from the generated page's table "alloc+free of one size, 1 thread".
  plot_results.py step-ratios --out F.svg TABLE.md
      step-time ratios with their intervals, from the markdown table that
      bench/torch_alloc/training.py prints (column "umem / PyTorch step in lockstep [95% interval]"
      and the control's column), one row per workload.
"""
import argparse
import json
import math
import os
import re
import sys

ALLOCATORS = ["umem", "glibc", "jemalloc", "mimalloc"]
LABELS = {"umem": "umem", "glibc": "glibc malloc", "jemalloc": "jemalloc", "mimalloc": "mimalloc"}
COLORS = {"umem": "#d62728", "glibc": "#1f77b4", "jemalloc": "#2ca02c", "mimalloc": "#9467bd",
          "control": "#7f7f7f"}
UNIT_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
NAME = re.compile(r"^alloc_free/(umem|glibc|jemalloc|mimalloc)/size:(\d+)/(?:.*/)?threads:1"
                  r"(?:_(median))?$")


def series_from_json(paths):
    """{allocator: {bytes: ns}} for 1 thread; medians win over single runs."""
    out = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for b in doc.get("benchmarks", []):
            m = NAME.match(b.get("name", ""))
            if not m:
                continue
            agg = b.get("aggregate_name")
            if b.get("run_type") == "aggregate" and agg != "median":
                continue
            ns = b["cpu_time"] * UNIT_NS[b.get("time_unit", "ns")]
            sizes = out.setdefault(m.group(1), {})
            size = int(m.group(2))
            if agg == "median" or size not in sizes:
                sizes[size] = ns
    return out


SIZE = re.compile(r"^(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)")
VALUE = re.compile(r"^(\d+(?:\.\d+)?) (ns|µs|us|ms|s)\b")


def series_from_markdown(path):
    """{allocator: {bytes: ns}} from the table 'alloc+free of one size, 1 thread'."""
    with open(path) as f:
        lines = f.read().splitlines()
    try:
        start = lines.index("## alloc+free of one size, 1 thread")
    except ValueError:
        sys.exit(f"{path}: no section 'alloc+free of one size, 1 thread'")
    rows = [l for l in lines[start + 1:] if l.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cols = {"umem": header.index("umem"), "glibc": header.index("glibc malloc"),
            "jemalloc": header.index("jemalloc"), "mimalloc": header.index("mimalloc")}
    out = {a: {} for a in cols}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        m = SIZE.match(cells[0])
        if not m:
            break
        size = int(float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)])
        for a, i in cols.items():
            v = VALUE.match(cells[i])
            if v:
                out[a][size] = float(v.group(1)) * UNIT_NS[v.group(2)]
    return out


def fmt_size(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:g} µs"
    return f"{ns:g} ns"


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg(width, height, body, title):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">\n'
            f'<title>{esc(title)}</title>\n<rect width="100%" height="100%" fill="white"/>\n'
            + "\n".join(body) + "\n</svg>\n")


def draw_sizes(series, title):
    w, h, left, right, top, bottom = 720, 420, 70, 150, 40, 50
    sizes = sorted({s for v in series.values() for s in v})
    values = [ns for v in series.values() for ns in v.values()]
    if not sizes or not values:
        sys.exit("no alloc+free rows for 1 thread")
    x0, x1 = math.log2(sizes[0]), math.log2(sizes[-1]) if len(sizes) > 1 else math.log2(sizes[0]) + 1
    y0 = math.floor(math.log10(min(values)))
    y1 = math.ceil(math.log10(max(values)))
    if y1 == y0:
        y1 += 1
    px = lambda s: left + (math.log2(s) - x0) / (x1 - x0) * (w - left - right)
    py = lambda ns: h - bottom - (math.log10(ns) - y0) / (y1 - y0) * (h - top - bottom)
    body = [f'<text x="{left}" y="22" font-size="14">{esc(title)}</text>']
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ddd"/>')
        body.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt_ns(10 ** e)}</text>')
    last = -1e9
    for s in sizes:
        x = px(s)
        if x - last < 45:  # labels closer than that would overlap; the points keep their titles
            continue
        last = x
        body.append(f'<text x="{x:.1f}" y="{h - bottom + 18}" text-anchor="middle">{fmt_size(s)}</text>')
    body.append(f'<text x="{(left + w - right) / 2}" y="{h - 10}" text-anchor="middle">'
                'block size (log scale)</text>')
    body.append(f'<text transform="translate(16,{(top + h - bottom) / 2}) rotate(-90)" '
                'text-anchor="middle">CPU time per alloc+free (log scale)</text>')
    for i, a in enumerate(a for a in ALLOCATORS if a in series and series[a]):
        pts = sorted(series[a].items())
        path = " ".join(f"{px(s):.1f},{py(ns):.1f}" for s, ns in pts)
        body.append(f'<polyline class="series" data-series="{a}" fill="none" stroke="{COLORS[a]}" '
                    f'stroke-width="2" points="{path}"/>')
        for s, ns in pts:
            body.append(f'<circle cx="{px(s):.1f}" cy="{py(ns):.1f}" r="3" fill="{COLORS[a]}">'
                        f'<title>{esc(LABELS[a])} {fmt_size(s)}: {ns:.3g} ns</title></circle>')
        ly = top + 10 + 20 * i
        body.append(f'<line x1="{w - right + 15}" y1="{ly}" x2="{w - right + 40}" y2="{ly}" '
                    f'stroke="{COLORS[a]}" stroke-width="2"/>')
        body.append(f'<text x="{w - right + 45}" y="{ly + 4}">{esc(LABELS[a])}</text>')
    return svg(w, h, body, title)


RATIO = re.compile(r"^(\d+\.\d+) \[(\d+\.\d+), (\d+\.\d+)\]")


def ratios_from_markdown(path):
    """[(workload, (r, lo, hi), (r, lo, hi) or None)] from training.py's table."""
    with open(path) as f:
        rows = [l for l in f.read().splitlines() if l.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    ui = next(i for i, c in enumerate(header) if c.startswith("umem / PyTorch step in lockstep"))
    ci = next((i for i, c in enumerate(header) if c.startswith("control / PyTorch step")), None)
    out = []
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        m = RATIO.match(cells[ui])
        if not m:
            continue
        c = RATIO.match(cells[ci]) if ci is not None else None
        out.append((cells[0], tuple(map(float, m.groups())),
                    tuple(map(float, c.groups())) if c else None))
    if not out:
        sys.exit(f"{path}: no ratio with an interval")
    return out


def draw_ratios(rows, title, target):
    w, left, right, top, band = 720, 110, 40, 70, 50
    h = top + band * len(rows) + 75
    vals = [v for _, u, c in rows for v in (u + (c or ()))] + [1.0, target]
    lo, hi = min(vals), max(vals)
    pad = (hi - lo) * 0.1 or 0.01
    lo, hi = lo - pad, hi + pad
    px = lambda r: left + (r - lo) / (hi - lo) * (w - left - right)
    bottom_y = top + band * len(rows)
    body = [f'<text x="{left}" y="22" font-size="14">{esc(title)}</text>']
    for r, label, dash in ((1.0, "1 (parity)", ""), (target, f"target {target:g}", ' stroke-dasharray="4 3"')):
        x = px(r)
        body.append(f'<line x1="{x:.1f}" y1="{top - 10}" x2="{x:.1f}" y2="{bottom_y}" stroke="#999"{dash}/>')
        body.append(f'<text x="{x:.1f}" y="{top - 14}" text-anchor="middle">{label}</text>')
    steps = 5
    for k in range(steps + 1):
        r = lo + (hi - lo) * k / steps
        body.append(f'<text x="{px(r):.1f}" y="{bottom_y + 18}" text-anchor="middle">{r:.3f}</text>')
    body.append(f'<text x="{(left + w - right) / 2}" y="{bottom_y + 38}" text-anchor="middle">'
                'step time / PyTorch default step time (median of rounds, 95 % interval)</text>')
    for i, (name, u, c) in enumerate(rows):
        y = top + band * i + band / 2
        body.append(f'<text x="{left - 10}" y="{y + 4:.1f}" text-anchor="end">{esc(name)}</text>')
        for key, v, dy in (("umem", u, -8), ("control", c, 8)):
            if v is None:
                continue
            r, a, b = v
            yy = y + dy
            body.append(f'<g class="series" data-series="{key}" data-workload="{esc(name)}">'
                        f'<line x1="{px(a):.1f}" y1="{yy:.1f}" x2="{px(b):.1f}" y2="{yy:.1f}" '
                        f'stroke="{COLORS[key] if key == "control" else COLORS["umem"]}" stroke-width="2"/>'
                        f'<circle cx="{px(r):.1f}" cy="{yy:.1f}" r="4" '
                        f'fill="{COLORS[key] if key == "control" else COLORS["umem"]}">'
                        f'<title>{esc(name)} {key}: {r:.3f} [{a:.3f}, {b:.3f}]</title></circle></g>')
    lx = left
    for j, (key, label) in enumerate((("umem", "umem / PyTorch"), ("control", "control: PyTorch's default against itself"))):
        body.append(f'<circle cx="{lx + 160 * j}" cy="{h - 14}" r="4" fill="{COLORS[key]}"/>'
                    f'<text x="{lx + 160 * j + 8}" y="{h - 10}">{label}</text>')
    return svg(w, h + 0, body, title)


def write(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("alloc-sizes")
    a.add_argument("--out", required=True)
    a.add_argument("--from-markdown")
    a.add_argument("--title", default="alloc+free of one size, 1 thread: CPU time per operation")
    a.add_argument("json", nargs="*")
    r = sub.add_parser("step-ratios")
    r.add_argument("--out", required=True)
    r.add_argument("--target", type=float, default=1.02)
    r.add_argument("--title", default="Training step time on the GPU: umem / PyTorch's allocator")
    r.add_argument("table")
    args = p.parse_args(argv)
    if args.what == "alloc-sizes":
        if bool(args.from_markdown) == bool(args.json):
            p.error("give JSON files or --from-markdown, not both")
        series = series_from_markdown(args.from_markdown) if args.from_markdown else series_from_json(args.json)
        write(args.out, draw_sizes(series, args.title))
    else:
        write(args.out, draw_ratios(ratios_from_markdown(args.table), args.title, args.target))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
