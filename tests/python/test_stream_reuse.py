"""Stream-ordered reuse (Note [Stream-ordered reuse] in umem_torch.h), with fake events that
complete only when the test says so (a fresh process: the provider precedes the bridge)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_block_freed_on_stream_a_waits_for_a_before_stream_b_gets_it(package_dir):
    run = subprocess.run([sys.executable, os.path.join(HERE, "stream_reuse_child.py"), package_dir],
                         capture_output=True, text=True, check=True, timeout=120)
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["held_after_free"] == 1 << 20        # A's work pending: the block waits
    assert r["same_stream_reuses_block"] is True  # stream A may take it at once
    assert r["stream_reuses"] == 1
    assert r["other_stream_gets_other_block"] is True
    assert r["held_while_pending"] == 1 << 20
    assert r["held_after_completion"] == 0        # released once A's event completed
    assert r["other_stream_reuses_after_completion"] is True
    assert r["held_after_empty_cache"] == 0


def test_record_stream_capture_deferral_and_pytorch_statistics(package_dir):
    run = subprocess.run([sys.executable, os.path.join(HERE, "stream_uses_child.py"), package_dir],
                         capture_output=True, text=True, check=True, timeout=120)
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["reported_bytes"] == 512 and r["requested_bytes"] == 100  # PyTorch's rounding
    assert r["small_pool_blocks"] == 1 and r["owns"] == 1
    assert r["active_after_own_stream_free"] == 0  # free for its own stream at once
    assert r["events_on_both_streams"] == [0xA000, 0xB000]
    assert r["active_while_used_elsewhere"] == 1 << 20
    assert r["own_stream_waits_too"] is True
    assert r["inactive_after_completion"] == 1 << 20  # only the new block r is active
    assert r["events_recorded_during_capture"] == 0
    assert r["other_stream_during_capture_gets_another"] is True
    assert r["events_recorded_at_capture_end"] >= 1
    assert r["segment_alloc_counted"] == 0
    assert r["segment_outside_the_cache"] is True
    assert r["segment_in_reserved"] == 0  # lent memory is PyTorch's to report
    # One live block, requested 3 MiB; its size is what the pool handed out (a free block whose
    # remainder would have been 1 MiB or less is not split, as in PyTorch).
    [(size, requested, allocated, active)] = r["visited_block"]
    assert (requested, allocated, active) == (3 << 20, 1, 1)
    assert 3 << 20 <= size <= 4 << 20
