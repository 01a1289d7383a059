"""Fake stream events for the bridge (umem_torch_event_provider): an event recorded on a stream
stays pending until the test completes it. Install before the bridge exists (a fresh process)."""
import ctypes

CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int)
RECORD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
SYNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Provider(ctypes.Structure):
    _fields_ = [("create", CREATE), ("record", RECORD), ("query", QUERY),
                ("synchronize", SYNC), ("destroy", DESTROY)]


class FakeEvents:
    """`pending[id]` is True once an event has completed; `recorded_on[id]` its last stream;
    `records` counts record() calls (events are recycled, so ids repeat)."""

    def __init__(self):
        self.pending = {}
        self.recorded_on = {}
        self.records = 0
        self._next = 1
        # Kept as attributes: the C side holds these function pointers for the process's life.
        self._provider = _Provider(CREATE(self._create), RECORD(self._record), QUERY(self._query),
                                   SYNC(self._sync), DESTROY(self._destroy))

    def install(self, lib, check):
        check(lib.umem_torch_set_event_provider(ctypes.byref(self._provider)))

    def complete_all(self):
        for e in self.pending:
            self.pending[e] = True

    def _create(self, device):
        i = self._next
        self._next += 1
        self.pending[i] = True
        return i

    def _record(self, e, stream):
        self.pending[e] = False  # work is queued on the stream until the test completes it
        self.recorded_on[e] = stream
        self.records += 1

    def _query(self, e):
        return 1 if self.pending[e] else 0

    def _sync(self, e):
        self.pending[e] = True

    def _destroy(self, e):
        self.pending.pop(e, None)
