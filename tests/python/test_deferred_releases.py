"""DeferredReleases (Note [Deferred releases] in python/umem/torch/deferred_releases.py): an alias's
registration is released on a thread of its own, its owner kept alive until then, at most
`pending_max` waiting, none inherited by a forked child. The release function here records what
happened; the bridge's real one (umem_torch_alias_release on the HIP double) is exercised by
test_hip_interop.py and test_pipeline_copies.py."""
import os
import threading
import weakref

import pytest

from umem.torch.deferred_releases import DeferredReleases


class _Owner:
    pass


class _Recorder:
    """A release function: records (handle, thread, whether the handle's owner was alive), and
    blocks the handles in `held` until `gate` is set."""

    def __init__(self):
        self.calls = []
        self.owners = {}
        self.held = set()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def owner(self, handle):
        o = _Owner()
        self.owners[handle] = weakref.ref(o)
        return o

    def __call__(self, handle):
        if handle in self.held:
            self.entered.set()
            self.gate.wait(timeout=30)
        ref = self.owners.get(handle)
        self.calls.append((handle, threading.get_ident(), ref is not None and ref() is not None))


def _with_a_release_in_progress(pending_max):
    """A recorder and releases whose thread waits inside the release of "a"."""
    rec = _Recorder()
    rec.held.add("a")
    releases = DeferredReleases(rec, pending_max)
    releases.put("a", rec.owner("a"))
    assert rec.entered.wait(timeout=30)
    return rec, releases


def test_a_release_runs_on_the_releases_thread_with_its_owner_alive():
    rec = _Recorder()
    releases = DeferredReleases(rec, 4)
    assert releases.thread_ident() is None
    releases.put("a", rec.owner("a"))  # the only reference to the owner is the release's
    releases.settle()
    assert rec.calls == [("a", releases.thread_ident(), True)]
    assert releases.thread_ident() != threading.get_ident()
    assert rec.owners["a"]() is None  # dropped once released


def test_beyond_pending_max_the_caller_releases_itself():
    rec, releases = _with_a_release_in_progress(3)
    releases.put("b", rec.owner("b"))
    releases.put("c", rec.owner("c"))  # a running, b and c waiting: 3
    releases.put("d", rec.owner("d"))  # one too many: released here, at once
    assert rec.calls == [("d", threading.get_ident(), True)]
    rec.gate.set()
    releases.settle()
    thread = releases.thread_ident()
    assert sorted(rec.calls) == sorted([("a", thread, True), ("b", thread, True),
                                        ("c", thread, True), ("d", threading.get_ident(), True)])
    assert [c[0] for c in rec.calls[1:]] == ["a", "b", "c"]  # in the order they came


def test_settle_waits_for_the_release_in_progress():
    rec, releases = _with_a_release_in_progress(4)
    settled = threading.Event()
    waiter = threading.Thread(target=lambda: (releases.settle(), settled.set()))
    waiter.start()
    assert not settled.wait(timeout=0.2)  # a's release has not returned
    rec.gate.set()
    waiter.join(timeout=30)
    assert settled.is_set() and [c[0] for c in rec.calls] == ["a"]


# Forking while the releases' thread runs is the point here (Python 3.12+ warns about it).
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_inherits_no_pending_release():
    rec, releases = _with_a_release_in_progress(4)
    releases.put("b", rec.owner("b"))  # waiting behind a at the fork
    pid = os.fork()
    if pid == 0:
        # The child: no thread, nothing pending (settle returns at once), and a new release is
        # made on a thread of the child's own.
        ok = releases.thread_ident() is None
        releases.settle()
        releases.put("c", rec.owner("c"))
        releases.settle()
        ok = ok and [c[0] for c in rec.calls] == ["c"] and rec.calls[0][1] != threading.get_ident()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    rec.gate.set()
    releases.settle()
    assert [c[0] for c in rec.calls] == ["a", "b"]


def test_a_failed_release_is_a_warning_and_the_thread_goes_on():
    rec = _Recorder()

    def release(handle):
        if handle == "bad":
            raise RuntimeError("the runtime refused")
        rec(handle)

    releases = DeferredReleases(release, 4)
    with pytest.warns(UserWarning, match="the runtime refused"):
        releases.put("bad", rec.owner("bad"))
        releases.settle()
    releases.put("good", rec.owner("good"))
    releases.settle()
    assert [c[0] for c in rec.calls] == ["good"] and rec.owners["bad"]() is None
