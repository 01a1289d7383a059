"""fork() in a process using umem (Note [Fork] in fork_safety.hpp): children of a process whose
other thread allocates umem CPU tensors allocate, free and exit; a DataLoader with 4 fork workers
returns umem tensors made in the workers (a fresh process, so its threads are the test's own)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_children_forked_while_a_thread_allocates_allocate_free_and_exit(package_dir):
    run = subprocess.run([sys.executable, os.path.join(HERE, "fork_child.py"), package_dir, "200"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["failed"] == [], "exit statuses of failed children (-14: hung, killed by SIGALRM)"
    assert r["parent_ok"] is True
    # 8 batches of 8 tensors of 1024 elements each filled with its index.
    assert r["batch_sums"] == sorted(1024.0 * sum(range(8 * b, 8 * b + 8)) for b in range(8))
