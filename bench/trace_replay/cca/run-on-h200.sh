#!/usr/bin/env bash
# Replays the real traces through PyTorch's caching allocator (built here against the installed
# libtorch) and through umem's caching pool (the static umem-trace-replay carried from the
# development machine) on this machine, and prints both side by side with PASS/FAIL against the
# targets of docs/method/trace-replay.md. Targets failing is a result, not an error: exit 0. Exit 3
# only when nothing could be measured (no traces, no umem binary and no CCA build).
#
# Usage (from the repository root, on the H200 machine):
#   bench/trace_replay/cca/run-on-h200.sh [DIR]
# DIR (default build/trace/h200) holds umem-trace-replay and the trace_*.csv.gz files.
# Writes results.csv, results.md and cca-build.log into $OUT (or /tmp/trace-replay-out; the
# device tool returns at most 8 files), each replay's own log into /tmp/trace-replay-logs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dir=$(cd "${1:-$root/build/trace/h200}" && pwd) || { echo "FAIL: no folder ${1:-build/trace/h200}"; exit 3; }
out=${OUT:-/tmp/trace-replay-out}
logs=/tmp/trace-replay-logs
mkdir -p "$out" "$logs"
umem_bin=$dir/umem-trace-replay
results=$out/results.csv
: > "$results"
pin=""
command -v taskset >/dev/null && pin="taskset -c 1"

echo "== machine"
date -u '+date: %Y-%m-%d %H:%M UTC'
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
python3 -c 'import torch; print("torch:", torch.__version__, "cuda", torch.version.cuda)' 2>&1
echo "pinned to: ${pin:-no taskset}"

traces=$(ls "$dir"/trace_*.csv.gz 2>/dev/null)
[ -n "$traces" ] || { echo "FAIL: no trace_*.csv.gz in $dir"; exit 3; }

echo "== building cca-trace-replay against libtorch"
cca_bin=""
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>"$out/cca-build.log")
gen=""; command -v ninja >/dev/null && gen="-G Ninja"
if [ -n "$torch_prefix" ] &&
   cmake -S "$here" -B /tmp/cca-build $gen -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_PREFIX_PATH="$torch_prefix" >>"$out/cca-build.log" 2>&1 &&
   cmake --build /tmp/cca-build -j 8 >>"$out/cca-build.log" 2>&1; then
  cca_bin=/tmp/cca-build/cca-trace-replay
  echo "built $cca_bin"
else
  echo "FAIL: the CCA replay did not build; the end of $out/cca-build.log:"
  tail -30 "$out/cca-build.log"
fi
[ -x "$umem_bin" ] || echo "FAIL: $umem_bin is missing (carry build/trace/h200)"
[ -n "$cca_bin" ] || [ -x "$umem_bin" ] || exit 3

for t in $traces; do
  name=$(basename "$t")
  csv=/tmp/${name%.gz}
  gzip -dc "$t" > "$csv"
  if [ -n "$cca_bin" ]; then
    echo "== $name: PyTorch CCA (default config)"
    env -u PYTORCH_CUDA_ALLOC_CONF $pin "$cca_bin" --label cca "$csv" "$name" 2>&1 | tee "$logs/cca-$name.log"
    grep '^result,' "$logs/cca-$name.log" >> "$results"
    echo "== $name: PyTorch CCA (expandable_segments:True, for reference)"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True $pin "$cca_bin" --label cca-expandable \
      "$csv" "$name" 2>&1 | tee "$logs/cca-exp-$name.log"
    grep '^result,' "$logs/cca-exp-$name.log" >> "$results"
  fi
  if [ -x "$umem_bin" ]; then
    echo "== $name: umem caching pool"
    $pin "$umem_bin" "$t" 2>&1 | tee "$logs/umem-$name.log"
    grep '^result,' "$logs/umem-$name.log" >> "$results"
  fi
  if [ -x "$umem_bin" ]; then
    echo "== $name: umem caching pool, max_cached 512 MiB (free pages given back before growing)"
    $pin "$umem_bin" --max-cached 536870912 --label umem-max-cached "$t" 2>&1 |
      tee "$logs/umem-maxcached-$name.log"
    grep '^result,' "$logs/umem-maxcached-$name.log" >> "$results"
  fi
  if [ -x "$umem_bin" ]; then
    echo "== $name: umem caching pool without expandable segments (a new segment per miss)"
    $pin "$umem_bin" --no-expandable --label umem-no-expandable "$t" 2>&1 |
      tee "$logs/umem-noexp-$name.log"
    grep '^result,' "$logs/umem-noexp-$name.log" >> "$results"
  fi
done

echo "== side by side (targets: umem reserved/allocated <= 1.05, umem warm median <= CCA's, 0 integrity failures)"
python3 - "$results" "$out/results.md" <<'PY'
import sys, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) != 12: continue
    _, who, trace, pa, pr, ratio, ua, uf, med, p99, integ, sv = f
    rows[trace][who] = dict(pa=int(pa), pr=int(pr), ratio=float(ratio), ua=ua, uf=uf,
                            med=float(med), p99=float(p99), integ=int(integ), sv=int(sv))
gib = lambda b: "%.3f" % (b / 2**30)
md = ["| trace | allocator | peak allocated (GiB) | peak reserved (GiB) | reserved/allocated | "
      "upstream allocs/frees | warm median (ns) | warm p99 (ns) | integrity failures |",
      "|---|---|---|---|---|---|---|---|---|"]
print("%-28s %-15s %10s %10s %7s %11s %8s %8s %6s" % ("trace", "allocator", "alloc GiB",
      "resv GiB", "ratio", "up a/f", "p50 ns", "p99 ns", "integ"))
verdicts = []
for trace, by in rows.items():
    for who, r in by.items():
        integ = "n/a" if r["integ"] < 0 else str(r["integ"])
        print("%-28s %-15s %10s %10s %7.4f %11s %8.0f %8.0f %6s" % (trace, who, gib(r["pa"]),
              gib(r["pr"]), r["ratio"], r["ua"] + "/" + r["uf"], r["med"], r["p99"], integ))
        md.append("| %s | %s | %s | %s | %.4f | %s/%s | %.0f | %.0f | %s |" % (trace, who,
                  gib(r["pa"]), gib(r["pr"]), r["ratio"], r["ua"], r["uf"], r["med"], r["p99"], integ))
    c = by.get("cca")
    for who in [w for w in by if w.startswith("umem")]:
      u = by[who]
      def verdict(name, ok, detail):
          verdicts.append("%s  %-28s %-10s %-28s %s" % ("PASS" if ok else "FAIL", trace, who,
                                                       name, detail))
      verdict("reserved/allocated <= 1.05", u["ratio"] <= 1.05, "%.4f%s" % (u["ratio"],
              "" if not c else " (cca %.4f)" % c["ratio"]))
      verdict("zero integrity failures", u["integ"] == 0 and u["sv"] == 0,
              "%d failures, %d stream violations" % (u["integ"], u["sv"]))
      if c:
          verdict("warm median <= CCA's", u["med"] <= c["med"], "%.0f ns vs cca %.0f ns "
                  "(p99 %.0f vs %.0f)" % (u["med"], c["med"], u["p99"], c["p99"]))
      else:
          verdict("warm median <= CCA's", False, "no CCA result to compare with")
print()
print("\n".join(verdicts))
open(sys.argv[2], "w").write("\n".join(md) + "\n")
print("\nmarkdown rows for a log under docs/log/ (see docs/method/trace-replay.md):\n" + "\n".join(md))
PY
exit 0
