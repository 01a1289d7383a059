"""How the training benchmarks (training.py on a GPU, cpu_alloc_free.py's part 3) judge a
step-time ratio on a machine whose speed changes by up to 1.6 times from one second to the next.

Measured on the lent GPU machine (a KVM guest): within one process, blocks of 25 GPT-2 steps ran
at 12.6 ms and then at 20-22 ms, and back, whatever the allocator, while allocators differ by a
few percent. So two processes, one per allocator, train in lockstep (lockstep.py): they take turns
step by step, each step of one right after a step of the other, and step i of one is compared
with step i of the other, which ran a few milliseconds later on the same machine state. A pair's
ratio is the median over the timed steps (the second half) of those per-step ratios.

A round gives one pair's ratio; the rounds' ratios get a bootstrap interval: RESAMPLES times, draw
as many rounds as were run, with replacement, and take the median of their ratios; the interval
holds the middle CONFIDENCE of those medians. The control, a lockstep pair of two equal
allocators in every round, measures the method itself: the farther end of its interval from 1 is
the margin by which the method can misread a ratio, and it widens the measured interval on both
sides. A target is met ("ok") where the widened interval is at or below it and missed where it
is above it; otherwise the run cannot tell ("inconclusive"). So a control off by more than the
distance to the target leaves nothing judged, and there is no cliff where a control a little
off would throw away a clear result."""
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


def round_ratios(rounds, pair):
    """`pair`'s ratio in each of `rounds` (lockstep.complete_rounds) from its trials' step_ms."""
    return [pair_ratio(r[pair][0]["step_ms"], r[pair][1]["step_ms"]) for r in rounds]


def interval(ratios):
    """The bootstrap interval of the median of `ratios` (one per round), None for no ratio."""
    if not ratios:
        return None
    rng = random.Random(SEED)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios)))
                     for _ in range(RESAMPLES))
    tail = (1 - CONFIDENCE) / 2
    return medians[int(tail * RESAMPLES)], medians[int((1 - tail) * RESAMPLES) - 1]


def shown(ratio, ci):
    """A ratio and its interval as the tables print them."""
    return f"{ratio:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def margin(control):
    """What the method reads between equal allocators, beyond 1, at the control's interval's
    farther end."""
    return max(1 - control[0], control[1] - 1, 0.0)


def verdict(measured, control, target):
    """measured, control: intervals (or None). The verdict on measured <= target."""
    if measured is None or control is None:
        return "not judged (no round)"
    if measured[1] + margin(control) <= target:
        return "ok"
    if measured[0] - margin(control) > target:
        return "MISSED"
    return "inconclusive"
