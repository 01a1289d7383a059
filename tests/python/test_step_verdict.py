"""The training benchmark's step-time verdict (bench/torch_alloc/step_verdict.py) on rounds of
made-up trials whose true ratio is known, and training.py --from-log printing it from a log."""
import json
import os
import random
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "torch_alloc")
sys.path.insert(0, BENCH)
import step_verdict as sv  # noqa: E402

NAMES = ("torch", "torch-expandable", "umem", "control")


def trial(step, calibration=1.1):
    return {"median_step_ms": step, "median_calibration_ms": calibration}


def made_up(n, factor, noise, seed=1, slow=(), control=1.0):
    """n rounds of 13 ms steps times factor (umem) or control (the control), each trial off by a
    uniform +-noise; the (round, name) pairs in `slow` ran 1.5 times slower, calibration too."""
    rng = random.Random(seed)
    rounds = []
    for r in range(n):
        rnd = {}
        for name in NAMES:
            f = {"umem": factor, "control": control}.get(name, 1.0)
            speed = 1.5 if (r, name) in slow else 1.0
            rnd[name] = trial(13.0 * f * speed * (1 + rng.uniform(-noise, noise)), 1.1 * speed)
        rounds.append(rnd)
    return rounds


def judge(rounds):
    return sv.verdict(sv.interval(rounds, "umem", "torch"), sv.interval(rounds, "control", "torch"),
                      1.02)


def test_equal_allocators_on_a_quiet_machine_meet_the_target():
    rounds = made_up(12, 1.0, 0.01)
    lo, hi = sv.interval(rounds, "umem", "torch")
    assert lo <= 1 <= hi and hi - lo < 0.03
    assert judge(rounds) == "ok"


def test_a_clearly_slower_allocator_misses_it():
    rounds = made_up(12, 1.06, 0.01)
    assert sv.interval(rounds, "umem", "torch")[0] > 1.02
    assert judge(rounds) == "MISSED"


def test_a_small_difference_in_much_noise_is_inconclusive():
    assert judge(made_up(6, 1.02, 0.05)) == "inconclusive"


def test_a_control_that_reads_off_judges_nothing():
    assert judge(made_up(12, 1.0, 0.01, control=1.06)) == "not judged (control off)"


def test_slow_trials_are_left_out():
    # umem's trials ran slow in a third of the rounds; its full-speed trials are as fast as
    # PyTorch's, so the ratio of the kept trials' medians is 1 within the noise.
    slow = {(r, "umem") for r in range(0, 12, 3)}
    rounds = made_up(12, 1.0, 0.01, slow=slow)
    fastest = sv.fastest_calibration(rounds)
    assert len(sv.full_speed([r["umem"] for r in rounds], fastest)) == 8
    assert abs(sv.ratio(rounds, "umem", "torch", fastest) - 1) < 0.01
    assert judge(rounds) == "ok"


def test_no_full_speed_trial_of_one_allocator_judges_nothing():
    slow = {(r, "umem") for r in range(8)}
    rounds = made_up(8, 1.0, 0.01, slow=slow)
    assert sv.interval(rounds, "umem", "torch") is None
    assert judge(rounds) == "not judged (too few full-speed trials)"


def test_the_interval_is_the_same_for_the_same_rounds():
    rounds = made_up(10, 1.0, 0.03)
    assert sv.interval(rounds, "umem", "torch") == sv.interval(rounds, "umem", "torch")


@pytest.mark.parametrize("factor,expected", [(1.0, " ok |"), (1.06, " MISSED |")])
def test_training_from_log_prints_the_verdict(tmp_path, factor, expected):
    log = tmp_path / "training.jsonl"
    with open(log, "w") as f:
        for r, rnd in enumerate(made_up(10, factor, 0.01)):
            for name, t in rnd.items():
                f.write(json.dumps(dict(t, workload="gpt2", name=name, round=r, losses=[3.0] * 60,
                                        peak_reserved_bytes=690e6 if name == "umem" else 696e6))
                        + "\n")
        # A round cut short: one trial only, left out of the table.
        f.write(json.dumps(dict(trial(40.0), workload="gpt2", name="umem", round=10,
                                losses=[3.0] * 60, peak_reserved_bytes=690e6)) + "\n")
    out = subprocess.run([sys.executable, os.path.join(BENCH, "training.py"), "--from-log",
                          str(log)], capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| gpt2 |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1] == "10"  # rounds: the cut round is not one
    assert cells[2] == "10 / 10 / 10 / 10"
    assert cells[6].endswith(expected.strip(" |"))
    assert cells[-2] == "0.991 ok" and cells[-1] == "yes"
