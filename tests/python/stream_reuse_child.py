"""Run by test_stream_reuse.py in a fresh process: an event provider must be set before the
bridge exists. Fake events complete only when the test says so; prints one JSON result."""
import ctypes
import json
import sys

sys.path.insert(0, sys.argv[1])
import umem._lib as L  # noqa: E402

from fake_events import FakeEvents  # noqa: E402

lib = L.lib()
events = FakeEvents()
events.install(lib, L.check)
pending = events.pending


def stats():
    return L.take_json(lib.umem_torch_memory_stats_json(0))


A, B = ctypes.c_void_p(0xA000), ctypes.c_void_p(0xB000)
out = {}
size = 1 << 20
p = lib.umem_torch_pluggable_malloc(size, 0, A)
lib.umem_torch_pluggable_free(p, size, 0, A)
out["held_after_free"] = stats()["umem.held_for_streams_bytes"]
q = lib.umem_torch_pluggable_malloc(size, 0, A)  # same stream: reused at once
out["same_stream_reuses_block"] = q == p
out["stream_reuses"] = stats()["umem.stream_reuses"]
lib.umem_torch_pluggable_free(q, size, 0, A)
r = lib.umem_torch_pluggable_malloc(size, 0, B)  # other stream while A's work is pending
out["other_stream_gets_other_block"] = r != p
out["held_while_pending"] = stats()["umem.held_for_streams_bytes"]
for e in pending:
    pending[e] = True  # A's work completes
s = lib.umem_torch_pluggable_malloc(size, 0, B)  # the malloc releases completed blocks first
out["held_after_completion"] = stats()["umem.held_for_streams_bytes"]
out["other_stream_reuses_after_completion"] = s == p
lib.umem_torch_pluggable_free(r, size, 0, B)
lib.umem_torch_pluggable_free(s, size, 0, B)
released = ctypes.c_size_t()
L.check(lib.umem_torch_empty_cache(0, ctypes.byref(released)))  # waits (synchronize) on events
out["held_after_empty_cache"] = stats()["umem.held_for_streams_bytes"]
print(json.dumps(out))
