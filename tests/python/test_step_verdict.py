"""The training benchmark's step-time method without a GPU: the verdict
(bench/torch_alloc/step_verdict.py) on made-up steps whose true ratio is known, training.py's
lockstep of two forked trials (with a stand-in for the training), --from-log printing the
table from a log, and the CPU benchmark's training table (cpu_alloc_free.py's part 3) on made-up
trials."""
import json
import os
import random
import statistics
import subprocess
import sys
import time

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                     "torch_alloc")
sys.path.insert(0, BENCH)
import cpu_alloc_free  # noqa: E402
import lockstep as ls  # noqa: E402
import step_verdict as sv  # noqa: E402
import training  # noqa: E402


def machine_speed(steps, rng):
    """The lent machine's speed over `steps` steps: blocks of 5-30 steps at 1.0 or 1.4-1.6 times
    slower."""
    speed = []
    while len(speed) < steps:
        speed += [rng.choice([1.0, rng.uniform(1.4, 1.6)])] * rng.randint(5, 30)
    return speed[:steps]


def lockstep(factor, noise, rng, steps=60):
    """The steps of a pair: 13 ms times factor against 13 ms, both at the same machine speed,
    each step off by a uniform +-noise."""
    speed = machine_speed(steps, rng)
    return ([13.0 * factor * s * (1 + rng.uniform(-noise, noise)) for s in speed],
            [13.0 * s * (1 + rng.uniform(-noise, noise)) for s in speed])


def ratios(rounds, factor, noise, seed=1):
    rng = random.Random(seed)
    return [sv.pair_ratio(*lockstep(factor, noise, rng)) for _ in range(rounds)]


def judge(measured, control):
    return sv.verdict(sv.interval(measured), sv.interval(control), 1.02)


def test_the_pair_ratio_sees_through_the_machine_speed():
    # Half the steps 1.4-1.6 times slower on both sides: the ratio is the allocators' still.
    for factor in (1.0, 1.03):
        assert sv.pair_ratio(*lockstep(factor, 0.02, random.Random(3))) == pytest.approx(
            factor, abs=0.01)


def test_the_pair_ratio_uses_the_second_half():
    assert sv.pair_ratio([9.0, 9.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]) == 1.0


def test_a_pair_of_unequal_lengths_is_an_error():
    with pytest.raises(ValueError, match="same number of steps"):
        sv.pair_ratio([1.0, 2.0], [1.0])


def test_equal_allocators_meet_the_target():
    measured, control = ratios(10, 1.0, 0.03), ratios(10, 1.0, 0.03, seed=2)
    lo, hi = sv.interval(measured)
    assert lo <= 1 <= hi and hi < 1.02
    assert judge(measured, control) == "ok"


def test_a_clearly_slower_allocator_misses_it():
    measured = ratios(10, 1.05, 0.03)
    assert sv.interval(measured)[0] > 1.02
    assert judge(measured, ratios(10, 1.0, 0.03, seed=2)) == "MISSED"


def test_a_small_difference_in_much_noise_is_inconclusive():
    assert judge(ratios(4, 1.02, 0.3), ratios(4, 1.0, 0.3, seed=2)) == "inconclusive"


def test_a_control_that_reads_off_judges_nothing():
    # A method that reads 6 % between equal allocators cannot tell 1.00 from 1.02.
    control = ratios(10, 1.06, 0.03)
    assert sv.margin(sv.interval(control)) > 0.05
    assert judge(ratios(10, 1.0, 0.03), control) == "inconclusive"
    assert judge(ratios(10, 1.10, 0.03), control) == "MISSED"
    assert judge([], ratios(10, 1.0, 0.03)) == "not judged (no round)"


def test_a_control_a_little_off_widens_the_interval():
    # The control's interval reaches 1 % below 1: an allocator 1.5 % faster is still judged,
    # but one at 1.015 no longer fits under 1.02 with the margin.
    assert sv.margin((0.99, 0.999)) == pytest.approx(0.01)
    assert sv.margin((0.997, 1.004)) == pytest.approx(0.004)
    assert sv.verdict((0.984, 0.989), (0.99, 0.999), 1.02) == "ok"
    assert sv.verdict((1.012, 1.015), (0.99, 0.999), 1.02) == "inconclusive"
    assert sv.verdict((1.012, 1.015), (0.998, 1.002), 1.02) == "ok"
    assert sv.verdict((1.04, 1.05), (0.99, 0.999), 1.02) == "MISSED"


def test_the_interval_is_the_same_for_the_same_ratios():
    r = ratios(10, 1.0, 0.05)
    assert sv.interval(r) == sv.interval(r)


def fake_child(workload, allocator, steps, turn):
    """Stands in for the training: records when each step ran."""
    if allocator == "torch-expandable":
        raise RuntimeError("this trial fails")
    times = []
    for _ in range(steps):
        turn.wait()
        times.append(time.monotonic())
        time.sleep(0.002)
        turn.done()
    return {"allocator": allocator, "times": times}


def test_lockstep_trials_take_turns_step_by_step(monkeypatch):
    monkeypatch.setattr(training, "child", fake_child)
    first, second = training.train("gpt2", ["umem", "torch"], 20)
    assert (first["allocator"], second["allocator"]) == ("umem", "torch")
    # Every step of the first ran before the same step of the second and after its step before.
    for i in range(20):
        assert first["times"][i] < second["times"][i]
        if i:
            assert second["times"][i - 1] < first["times"][i]


def test_a_failing_trial_ends_its_partner_and_the_run(monkeypatch):
    monkeypatch.setattr(training, "child", fake_child)
    with pytest.raises(SystemExit, match="torch-expandable gpt2 failed:(.|\n)*this trial fails"):
        training.train("gpt2", ["umem", "torch-expandable"], 20)


def test_which_pair_and_side_goes_first_alternates_by_round():
    pairs = {"umem": ("umem", "torch"), "control": ("torch", "torch")}
    assert ls.order(0, pairs) == [("umem", [("measured", "umem"), ("anchor", "torch")]),
                                  ("control", [("measured", "torch"), ("anchor", "torch")])]
    assert ls.order(1, pairs) == [("control", [("anchor", "torch"), ("measured", "torch")]),
                                  ("umem", [("anchor", "torch"), ("measured", "umem")])]
    assert ls.order(2, pairs) == ls.order(0, pairs)


def log_of(factor, rounds, path):
    rng = random.Random(5)

    def trial(steps, **k):
        return dict(k, workload="gpt2", step_ms=steps, median_step_ms=sorted(steps)[30],
                    median_calibration_ms=1.2, losses=[3.0] * 60,
                    peak_reserved_bytes=690e6 if k["name"] == "umem" else 696e6)
    with open(path, "w") as f:
        f.write(json.dumps(trial([13.0] * 60, name="torch-expandable", round=0)) + "\n")
        for r in range(rounds):
            for pair, f_ in (("umem", factor), ("control", 1.0)):
                a, b = lockstep(f_, 0.02, rng)
                measured = "umem" if pair == "umem" else "torch"
                f.write(json.dumps(trial(a, name=measured, round=r, pair=pair, side="measured"))
                        + "\n")
                f.write(json.dumps(trial(b, name="torch", round=r, pair=pair, side="anchor"))
                        + "\n")
        # A round cut short: one trial only, left out of the table.
        f.write(json.dumps(trial([40.0] * 60, name="umem", round=rounds, pair="umem",
                                 side="measured")) + "\n")


@pytest.mark.parametrize("factor,expected", [(1.0, "ok"), (1.06, "MISSED")])
def test_training_from_log_prints_the_verdict(tmp_path, factor, expected):
    log_of(factor, 8, tmp_path / "training.jsonl")
    out = subprocess.run([sys.executable, os.path.join(BENCH, "training.py"), "--from-log",
                          str(tmp_path / "training.jsonl")], capture_output=True, text=True,
                         check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| gpt2 |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1] == "8"  # rounds: the cut round is not one
    with open(tmp_path / "training.jsonl") as f:
        umem = [t["median_step_ms"] for t in map(json.loads, f)
                if t["name"] == "umem" and t["round"] < 8]
    assert cells[4] == f"{statistics.median(umem):.2f}"  # nor is its trial in the step column
    assert cells[5].endswith(" " + expected)
    assert cells[-2] == "0.991 ok" and cells[-1] == "yes"


def cpu_trials(factor, last_loss, rounds=5):
    """cpu_alloc_free.measure_training's records: per round and model, umem's steps `factor` times
    PyTorch's, and the control's equal; every loss 2.5 but umem's last one `last_loss`."""
    rng = random.Random(3)
    trials = []
    for r in range(rounds):
        for model in cpu_alloc_free.MODELS:
            for pair, f_, measured in (("umem", factor, "umem"), ("control", 1.0, "torch")):
                a, b = lockstep(f_, 0.02, rng, steps=cpu_alloc_free.STEPS)
                loss = last_loss if pair == "umem" and r == rounds - 1 else 2.5
                trials += [dict(model=model, round=r, pair=pair, side="measured",
                                allocator=measured, step_ms=a, loss=loss),
                           dict(model=model, round=r, pair=pair, side="anchor",
                                allocator="torch", step_ms=b, loss=2.5)]
    return trials


@pytest.mark.parametrize("factor,expected", [(0.95, "ok"), (1.0, "inconclusive"),
                                             (1.06, "MISSED")])
def test_the_cpu_training_table_judges_umem_against_1(capsys, factor, expected):
    cpu_alloc_free.print_training({"umem": [cpu_trials(factor, 2.5)]})
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("| MLP |", "| transformer |"))]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[1] == "5"
        ratio = float(cells[4].split()[0])
        assert abs(ratio - factor) < 0.02
        assert cells[5] == expected
        assert cells[6].startswith("1.0") or cells[6].startswith("0.99")
        assert (cells[7], cells[8]) == ("2.5", "yes")


def test_the_cpu_training_table_leaves_out_a_round_cut_short(capsys):
    trials = cpu_trials(1.0, 2.5)
    # A sixth round with one trial, far slower and with another loss: in no column.
    trials.append(dict(trials[0], round=5, step_ms=[x * 3 for x in trials[0]["step_ms"]],
                       loss=9.0))
    cpu_alloc_free.print_training({"umem": [trials]})
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| MLP |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1] == "5"
    assert abs(float(cells[4].split()[0]) - 1.0) < 0.02
    assert (cells[7], cells[8]) == ("2.5", "yes")


def test_the_cpu_training_table_says_when_losses_differ(capsys):
    cpu_alloc_free.print_training({"umem": [cpu_trials(1.0, 2.75)]})
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| MLP |")]
    assert rows[0].rstrip(" |").endswith("NO")
