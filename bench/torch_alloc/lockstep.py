"""Trials that take turns, each a process forked from the caller (step_verdict.py says why the
benchmarks compare steps this way). A trial is a function of a Turn: it calls turn.wait() before
each turn (one step, or several) and turn.done() after it, and returns a JSON-serializable result.

Forking after `import torch` spares each trial an interpreter start; the caller must not have
started what a fork cannot carry (a GPU context, an OpenMP thread pool)."""
import json
import os
import signal
import sys
import traceback


class PartnerEnded(Exception):
    """The other trial of a lockstep pair ended before this one's steps were done."""


class Turn:
    """A trial's side of the lockstep: it waits for its turn on one pipe and hands it back on
    another."""

    def __init__(self, go, back):
        self.go, self.back = go, back

    def wait(self):
        if not os.read(self.go, 1):
            raise PartnerEnded()

    def done(self):
        os.write(self.back, b".")


def step_taken(go, back):
    """Lets a lockstep trial take one step; False where it has ended instead."""
    try:
        os.write(go, b".")
    except BrokenPipeError:
        return False
    return os.read(back, 1) == b"."


def order(r, pairs):
    """Round r's lockstep pairs (`pairs`: {pair: (measured, anchor)}) in the order they train, each
    (pair, [(side, contender), ...]) with its sides in turn order. Which pair and which side goes
    first alternates from round to round, so that neither gains from going first."""
    way = 1 if r % 2 == 0 else -1
    return [(pair, [("measured", measured), ("anchor", anchor)][::way])
            for pair, (measured, anchor) in list(pairs.items())[::way]]


def complete_rounds(trials, pairs):
    """The complete rounds among trial records (each with its round, pair and side), each
    {pair: (measured trial, anchor trial)}, in round order; a round cut short is left out."""
    by_round = {}
    for t in trials:
        by_round.setdefault(t["round"], {}).setdefault(t["pair"], {})[t["side"]] = t
    return [{p: (sides["measured"], sides["anchor"]) for p, sides in by_round[r].items()}
            for r in sorted(by_round)
            if set(by_round[r]) == set(pairs) and all(len(x) == 2 for x in by_round[r].values())]


def run(trials, names, turns, timeout_s):
    """Runs `trials` (one alone with turn None, or several in lockstep: `turns` turns each, in
    turn, the first one first), each in a forked child that gets `timeout_s`; their results in
    order. A trial that fails ends the run with its name and traceback."""
    n = len(trials)
    # Per child: results, go and back pipes; the parent keeps one end of each, the child the other.
    pipes = [[os.pipe() for _ in range(3)] for _ in range(n)]
    mine = [(res[1], go[0], back[1]) for res, go, back in pipes]
    theirs = [(res[0], go[1], back[0]) for res, go, back in pipes]
    pids = []
    for k, trial in enumerate(trials):
        pid = os.fork()
        if pid == 0:
            for fd in {fd for p in pipes for end in p for fd in end} - set(mine[k]):
                os.close(fd)
            signal.alarm(timeout_s)
            result, go, back = mine[k]
            try:
                out = {"ok": trial(Turn(go, back) if n > 1 else None)}
            except PartnerEnded:
                out = {"partner_ended": True}
            except BaseException:  # noqa: B036 (reported to the parent, whatever it was)
                out = {"error": traceback.format_exc()}
            with os.fdopen(result, "w") as f:
                f.write(json.dumps(out))
            os._exit(0)  # no atexit handlers of the parent's interpreter
        pids.append(pid)
    for fds in mine:
        for fd in fds:
            os.close(fd)
    if n > 1:
        for _ in range(turns):
            if not all(step_taken(go, back) for _, go, back in theirs):
                break  # a child ended: closing its partner's pipes below ends the partner too
    for _, go, back in theirs:
        os.close(go)
        os.close(back)
    outs = []
    for (result, _, _), pid in zip(theirs, pids):
        with os.fdopen(result) as f:
            text = f.read()
        _, status = os.waitpid(pid, 0)
        outs.append(json.loads(text) if text else {"error": f"died (wait status {status})"})
    for out, name in zip(outs, names):
        if "error" in out:
            sys.exit(f"{name} failed:\n{out['error']}")
    if any("partner_ended" in out for out in outs):
        sys.exit(f"the lockstep trials {', '.join(names)} ended early")
    return [out["ok"] for out in outs]
