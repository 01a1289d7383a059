"""Instructions per operation of the benchmark loop, from `callgrind_annotate --tree=caller`
output on standard input (bench/instructions-per-op.sh). In that output each function ("*" line)
follows the lines of its callers ("<" lines: "COST (P%)  < CALLER (Nx) [OBJECT]"): the loop is
alloc_free_single, and the calls it makes on every operation are those with the largest call
counts (its warm-up's calls are not counted). Prints the inclusive cost of those calls divided by
the operations."""
import re
import sys

CALLER = re.compile(r"^\s*([\d,]+) \(.*?\)\s+<\s+(.*) \(([\d,]+)x\)")
FUNCTION = re.compile(r"^\s*[\d,]+ \(.*?\)\s+\*")


def number(text):
    return int(text.replace(",", ""))


def main():
    calls, pending = [], []
    for line in sys.stdin:
        m = CALLER.match(line)
        if m:
            pending.append((number(m[1]), m[2], number(m[3])))
            continue
        if FUNCTION.match(line):
            calls += [(cost, n) for cost, caller, n in pending
                      if re.search(r"\balloc_free_single<", caller) and "warm_up" not in caller]
            pending = []
    ops = max((n for _, n in calls), default=0)
    if ops == 0:
        sys.exit("no calls from the benchmark loop in the callgrind output")
    print(f"{sum(cost for cost, n in calls if n * 2 > ops) / ops:.0f}")


if __name__ == "__main__":
    main()
