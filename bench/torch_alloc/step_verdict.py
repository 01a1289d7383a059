"""How training.py judges a step-time ratio on a machine whose speed changes by up to 1.6 times
from one second to the next.

Measured on the lent GPU machine (a KVM guest): within one process, blocks of 25 GPT-2 steps ran
at 12.6 ms and then at 20-22 ms, and back, whatever the allocator, while allocators differ by a
few percent. So two processes, one per allocator, train in lockstep (training.py): they take turns
step by step, each step of one right after a step of the other, and step i of one is compared
with step i of the other, which ran a few milliseconds later on the same machine state. A pair's
ratio is the median over the timed steps (the second half) of those per-step ratios.

A round gives one pair's ratio; the rounds' ratios get a bootstrap interval: RESAMPLES times, draw
as many rounds as were run, with replacement, and take the median of their ratios; the interval
holds the middle CONFIDENCE of those medians. A target is met ("ok") where the whole interval is
at or below it and missed where the whole interval is above it; otherwise the run cannot tell
("inconclusive"). The control, a lockstep pair of two equal allocators in every round, checks the
method: where its interval excludes 1 nothing is judged."""
import random
import statistics

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0  # fixed: the same log gives the same intervals


def pair_ratio(steps, anchor_steps):
    """The median of step[i] / anchor_step[i] over the second half of the steps."""
    if len(steps) != len(anchor_steps) or not steps:
        raise ValueError(f"a lockstep pair needs the same number of steps on both sides, got "
                         f"{len(steps)} and {len(anchor_steps)}")
    timed = slice(len(steps) // 2, None)
    return statistics.median(a / b for a, b in zip(steps[timed], anchor_steps[timed]))


def interval(ratios):
    """The bootstrap interval of the median of `ratios` (one per round), None for no ratio."""
    if not ratios:
        return None
    rng = random.Random(SEED)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return medians[int(tail * RESAMPLES)], medians[int((1 - tail) * RESAMPLES) - 1]


def verdict(measured, control, target):
    """measured, control: intervals (or None). The verdict on measured <= target."""
    if measured is None or control is None:
        return "not judged (no round)"
    if not control[0] <= 1 <= control[1]:
        return "not judged (control off)"
    if measured[1] <= target:
        return "ok"
    if measured[0] > target:
        return "MISSED"
    return "inconclusive"
