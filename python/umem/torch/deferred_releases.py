"""Releases of aliases' registrations, made on a thread of their own.

Note [Deferred releases]
The last alias of memory umem did not allocate releases its registration with the GPU runtime
(umem_torch_alias_release), and with HIP that release waits for the device: clr's
ihipHostUnregister calls SyncAllStreams (hipamd/src/hip_memory.cpp) before it removes the
registration. An alias usually dies where the program moves on (a training loop rebinding its
batch), so releasing there would make the loop wait for every kernel it had queued, and the GPU
would run dry while Python queues the next step. So a release goes to one thread of its own,
which does the waiting (clr waits outside its stream-set lock, Device::SyncAllStreams in
hipamd/src/hip_device.cpp, so other threads' launches go on meanwhile). The alias's owner (what
keeps the memory alive) stays alive until its registration is gone: pages must never be freed
while registered. A release that fails is reported as a warning and the thread goes on (the
library has logged why). At most `pending_max`
releases wait; beyond that the caller releases itself (and waits), so the memory held for
releases stays bounded when the GPU falls behind. A forked child starts with no pending releases
(the parent's registrations are not the child's to release) and no thread. During interpreter
shutdown, when no thread can start, releases are made by the caller.
"""
import collections
import os
import sys
import threading
import warnings


class DeferredReleases:
    def __init__(self, release, pending_max):
        """`release(handle)` releases one registration; called without any lock held."""
        self._release = release
        self._pending_max = pending_max
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self):
        # Re-entrant (Condition's default RLock): a garbage collection inside a locked section can
        # free an alias, whose deleter calls put() on the same thread.
        self._cond = threading.Condition()
        self._pending = collections.deque()  # (handle, owner)
        self._running = 0  # taken by the thread, not finished
        self._thread = None
        self._starting = False

    def put(self, handle, owner):
        """Releases `handle` on the releases' thread, keeping `owner` alive until it is released;
        on the caller's thread when `pending_max` releases wait already or no thread can run."""
        with self._cond:
            if len(self._pending) + self._running < self._pending_max and self._started():
                self._pending.append((handle, owner))
                self._cond.notify_all()
                return
        self._release(handle)

    def settle(self):
        """Waits until every release handed to the thread is made."""
        with self._cond:
            while self._pending or self._running:
                self._cond.wait()

    def thread_ident(self):
        """The releases' thread's identifier, or None before the first deferred release."""
        return self._thread.ident if self._thread is not None else None

    def _started(self):
        # Called with the lock held.
        if self._thread is not None:
            return True
        if sys.is_finalizing() or self._starting:  # shutdown, or put() from inside the start
            return False
        self._starting = True
        try:
            thread = threading.Thread(target=self._run, name="umem-releases", daemon=True)
            thread.start()
        except RuntimeError:  # "can't create new thread at interpreter shutdown"
            return False
        finally:
            self._starting = False
        self._thread = thread
        return True

    def _run(self):
        cond = self._cond
        while True:
            with cond:
                while not self._pending:
                    cond.wait()
                handle, owner = self._pending.popleft()
                self._running += 1
            try:
                self._release(handle)
            except Exception as e:  # noqa: BLE001 - the thread must keep serving the others
                warnings.warn(f"umem: releasing an alias's registration failed: {e}")
            finally:
                del owner  # the memory may go now, never before its registration
                with cond:
                    self._running -= 1
                    cond.notify_all()
