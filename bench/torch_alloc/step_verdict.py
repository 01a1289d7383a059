"""How training.py judges a step-time ratio from trials on a machine whose speed changes from
process to process.

A trial is one process's result (workloads.run): its median step and median calibration. The lent
GPU machine runs a whole process either at full speed or 1.4-1.6 times slower, and at times at
speeds in between; the calibration tells them apart. Of a workload's trials only those whose
calibration is within SLOW_MODE of the workload's fastest count, and an allocator's step time is
the median of their steps.

A ratio's uncertainty comes from which processes happened to run fast, so the ratio gets a
bootstrap interval over rounds: RESAMPLES times, draw as many rounds as were run, with
replacement, keeping each round's trials together (a round's trials ran minutes apart at most),
and take the ratio of the drawn trials' step times; the interval holds the middle CONFIDENCE of
those ratios. A target is met ("ok") where the whole interval is at or below it and missed where
the whole interval is above it; otherwise the run cannot tell ("inconclusive"). The control, a
second trial of the anchor in every round, checks the method: where its interval excludes 1 the
rounds were not alike enough and nothing is judged."""
import random
import statistics

SLOW_MODE = 1.25  # a calibration this much slower than the fastest: the machine's slow mode
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0  # fixed: the same log gives the same intervals


def fastest_calibration(rounds):
    return min(t["median_calibration_ms"] for r in rounds for t in r.values())


def full_speed(trials, fastest):
    """The trials whose calibration ran at the machine's full speed."""
    return [t for t in trials if t["median_calibration_ms"] <= SLOW_MODE * fastest]


def step_ms(trials, fastest):
    """The median step of the full-speed trials, None where there is none."""
    kept = [t["median_step_ms"] for t in full_speed(trials, fastest)]
    return statistics.median(kept) if kept else None


def ratio(rounds, name, anchor, fastest):
    a = step_ms([r[name] for r in rounds], fastest)
    b = step_ms([r[anchor] for r in rounds], fastest)
    return a / b if a is not None and b is not None else None


def interval(rounds, name, anchor):
    """The bootstrap interval of step(name) / step(anchor) over `rounds` (a list of
    {allocator: trial}), or None where fewer than half the resamples hold a full-speed trial of
    both."""
    fastest = fastest_calibration(rounds)
    rng = random.Random(SEED)
    ratios = []
    for _ in range(RESAMPLES):
        x = ratio([rng.choice(rounds) for _ in rounds], name, anchor, fastest)
        if x is not None:
            ratios.append(x)
    if len(ratios) < RESAMPLES // 2:
        return None
    ratios.sort()
    tail = (1 - CONFIDENCE) / 2
    return ratios[int(tail * len(ratios))], ratios[int((1 - tail) * len(ratios)) - 1]


def verdict(measured, control, target):
    """measured, control: intervals (or None). The verdict on measured <= target."""
    if measured is None or control is None:
        return "not judged (too few full-speed trials)"
    if not control[0] <= 1 <= control[1]:
        return "not judged (control off)"
    if measured[1] <= target:
        return "ok"
    if measured[0] > target:
        return "MISSED"
    return "inconclusive"
