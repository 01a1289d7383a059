"""Stream-ordered reuse (Note [Stream-ordered reuse] in umem_torch.h), with fake events that
complete only when the test says so (a fresh process: the provider precedes the bridge)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_block_freed_on_stream_a_waits_for_a_before_stream_b_gets_it():
    root = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
    run = subprocess.run([sys.executable, os.path.join(HERE, "stream_reuse_child.py"), root],
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
