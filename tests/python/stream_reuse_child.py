"""Run by test_stream_reuse.py in a fresh process: an event provider must be set before the
bridge exists. Fake events complete only when the test says so; prints one JSON result."""
import ctypes
import json
import sys

sys.path.insert(0, sys.argv[1])
import umem._lib as L  # noqa: E402

lib = L.lib()
pending = {}  # event id -> completed?
recorded_on = {}
next_id = [1]

CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int)
RECORD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
QUERY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
SYNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Provider(ctypes.Structure):
    _fields_ = [("create", CREATE), ("record", RECORD), ("query", QUERY),
                ("synchronize", SYNC), ("destroy", DESTROY)]


def create(device):
    i = next_id[0]
    next_id[0] += 1
    pending[i] = True
    return i


def record(e, stream):
    pending[e] = False  # work is queued on the stream until complete() says otherwise
    recorded_on[e] = stream


def query(e):
    return 1 if pending[e] else 0


def sync(e):
    pending[e] = True


def destroy(e):
    pending.pop(e, None)


provider = Provider(CREATE(create), RECORD(record), QUERY(query), SYNC(sync), DESTROY(destroy))
L.check(lib.umem_torch_set_event_provider(ctypes.byref(provider)))


def stats():
    return L.take_json(lib.umem_torch_memory_stats_json(0))


A, B = ctypes.c_void_p(0xA000), ctypes.c_void_p(0xB000)
out = {}
size = 1 << 20
p = lib.umem_torch_malloc(size, 0, A)
lib.umem_torch_free(p, size, 0, A)
out["held_after_free"] = stats()["umem.held_for_streams_bytes"]
q = lib.umem_torch_malloc(size, 0, A)  # same stream: reused at once
out["same_stream_reuses_block"] = q == p
out["stream_reuses"] = stats()["umem.stream_reuses"]
lib.umem_torch_free(q, size, 0, A)
r = lib.umem_torch_malloc(size, 0, B)  # other stream while A's work is pending
out["other_stream_gets_other_block"] = r != p
out["held_while_pending"] = stats()["umem.held_for_streams_bytes"]
for e in pending:
    pending[e] = True  # A's work completes
s = lib.umem_torch_malloc(size, 0, B)  # the malloc releases completed blocks first
out["held_after_completion"] = stats()["umem.held_for_streams_bytes"]
out["other_stream_reuses_after_completion"] = s == p
lib.umem_torch_free(r, size, 0, B)
lib.umem_torch_free(s, size, 0, B)
released = ctypes.c_size_t()
L.check(lib.umem_torch_empty_cache(0, ctypes.byref(released)))  # waits (synchronize) on events
out["held_after_empty_cache"] = stats()["umem.held_for_streams_bytes"]
print(json.dumps(out))
