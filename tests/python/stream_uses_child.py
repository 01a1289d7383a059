"""Run by test_stream_reuse.py in a fresh process (the event provider precedes the bridge): the
extension's entry points with fake events that complete only when the test says so. Prints one
JSON result."""
import ctypes
import json
import sys

sys.path.insert(0, sys.argv[1])
import umem._lib as L  # noqa: E402

from fake_events import FakeEvents  # noqa: E402

lib = L.lib()
events = FakeEvents()
events.install(lib, L.check)
pending, recorded_on = events.pending, events.recorded_on


class Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("current", "peak", "allocated", "freed")]


class DeviceStats(ctypes.Structure):
    _fields_ = [(n, Stat * 3) for n in ("allocation", "segment", "active", "allocated_bytes",
                                        "reserved_bytes", "active_bytes", "requested_bytes")] + \
               [(n, ctypes.c_int64) for n in ("num_alloc_retries", "num_ooms",
                                              "num_device_alloc", "num_device_free")]


class Block(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint64), ("requested", ctypes.c_uint64),
                ("allocated", ctypes.c_int), ("active", ctypes.c_int)]


class Segment(ctypes.Structure):
    _fields_ = [("address", ctypes.c_uint64), ("size", ctypes.c_uint64), ("is_large", ctypes.c_int),
                ("block_count", ctypes.c_size_t), ("blocks", ctypes.POINTER(Block))]


def stats():
    s = DeviceStats()
    L.check(lib.umem_torch_get_device_stats(0, ctypes.byref(s)))
    return s


def alloc(size, stream):
    out = ctypes.c_void_p()
    L.check(lib.umem_torch_extension_alloc(size, 0, stream, ctypes.byref(out)))
    return out.value


A, B = ctypes.c_void_p(0xA000), ctypes.c_void_p(0xB000)
out = {}
size = 1 << 20

# PyTorch's sizes: 100 bytes count as 512, active while allocated.
before = stats()
p = alloc(100, A)
s = stats()
out["reported_bytes"] = s.allocated_bytes[0].current - before.allocated_bytes[0].current
out["requested_bytes"] = s.requested_bytes[0].current - before.requested_bytes[0].current
out["small_pool_blocks"] = s.allocation[1].current - before.allocation[1].current
out["owns"] = lib.umem_torch_owns(ctypes.c_void_p(p))
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(p)))
out["active_after_own_stream_free"] = stats().active[0].current - before.active[0].current

# record_stream: the block waits for both streams, for its own stream too.
p = alloc(size, A)
L.check(lib.umem_torch_record_stream(ctypes.c_void_p(p), B))
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(p)))
out["events_on_both_streams"] = sorted({recorded_on[e] for e in pending if not pending[e]})
out["active_while_used_elsewhere"] = stats().active_bytes[0].current - before.active_bytes[0].current
q = alloc(size, A)
out["own_stream_waits_too"] = q != p
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(q)))
events.complete_all()
r = alloc(size, B)  # the miss releases completed blocks first; then the pool may hand either out
out["inactive_after_completion"] = stats().active_bytes[0].current - before.active_bytes[0].current
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(r)))
events.complete_all()

# During a capture nothing is recorded; the block is reusable by its own stream only.
recorded = events.records
lib.umem_torch_capture_begin()
p = alloc(size, A)
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(p)))
out["events_recorded_during_capture"] = events.records - recorded
out["other_stream_during_capture_gets_another"] = alloc(size, B) != p
lib.umem_torch_capture_end()
out["events_recorded_at_capture_end"] = events.records - recorded

# Segments lent to PyTorch's own pools are not counted as PyTorch allocations here, and are
# memory of their own: never a block umem has cached.
cached = alloc(64 << 20, A)
pinned = alloc(4 << 20, A)  # in the same segment, so that the segment stays
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(cached)))
L.check(lib.umem_torch_empty_cache(1, ctypes.byref(ctypes.c_size_t())))  # into umem's pool
seg = ctypes.c_void_p()
s0 = stats()
L.check(lib.umem_torch_segment_alloc(2 << 20, 0, ctypes.byref(seg)))
s1 = stats()
out["segment_outside_the_cache"] = not cached <= seg.value < cached + (64 << 20)
out["segment_alloc_counted"] = s1.allocated_bytes[0].current - s0.allocated_bytes[0].current
out["segment_in_reserved"] = s1.reserved_bytes[0].current - s0.reserved_bytes[0].current
L.check(lib.umem_torch_segment_free(seg))
L.check(lib.umem_torch_extension_release(ctypes.c_void_p(pinned)))

# The segments visitor sees a live block with its requested size.
keep = alloc(3 << 20, A)
found = []
VISIT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Segment))


@VISIT
def visit(ctx, segp):
    sg = segp.contents
    address = sg.address
    for i in range(sg.block_count):  # blocks cover the segment in address order
        b = sg.blocks[i]
        if address == keep:
            found.append((b.size, b.requested, b.allocated, b.active))
        address += b.size


L.check(lib.umem_torch_visit_segments(0, visit, None))
out["visited_block"] = found
print(json.dumps(out))
