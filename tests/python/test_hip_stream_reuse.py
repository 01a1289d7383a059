"""Stream-ordered reuse on ROCm without empty_cache (Note [Stream-ordered reuse] in umem_torch.h):
the bridge on the ROCr double (UMEM_GPU_BACKEND=rocr) takes its stream events from the HIP
runtime the process has already loaded, here the HIP double. Each run is a fresh process: HIP must
be mapped before the bridge exists. Environment (the ctest entry sets it): UMEM_ROCR_DOUBLE,
UMEM_HIP_DOUBLE (the doubles' paths)."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# One MI300A APU (1 CPU + 1 GPU agent): its GPU is local to NUMA node 0, which every machine has.
CAPTURE = os.path.join(ROOT, "data", "machines",
                       "rocminfo_mi300a_1socket_sh5_protosample_gfx940_ROCm-ROCm_4411.txt")


def run_child(umtopo, tmp_path, package_dir, hip):
    for var in ("UMEM_ROCR_DOUBLE", "UMEM_HIP_DOUBLE"):
        if not os.environ.get(var):
            pytest.skip(f"{var} is not set (the ctest entry points it at the test double)")
    snapshot = tmp_path / "apu.json"
    with open(snapshot, "w") as f:
        subprocess.run([umtopo, "--rocminfo", CAPTURE, "--json"], stdout=f, check=True, timeout=60)
    env = dict(os.environ, UMEM_GPU_BACKEND="rocr", UMEM_HSA_RUNTIME_LIB=os.environ["UMEM_ROCR_DOUBLE"],
               UMEM_ROCR_DOUBLE_SNAPSHOT=str(snapshot), UMEM_HIP_RUNTIME_LIB=os.environ["UMEM_HIP_DOUBLE"],
               UMEM_HIP_DOUBLE_ROCR=os.environ["UMEM_ROCR_DOUBLE"])  # HIP runs over that ROCr
    run = subprocess.run([sys.executable, os.path.join(HERE, "hip_stream_reuse_child.py"),
                          package_dir, os.environ["UMEM_HIP_DOUBLE"] if hip else "-"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_hip_events_hand_a_block_to_another_stream_once_its_stream_passed_it(umtopo, tmp_path,
                                                                            package_dir):
    r = run_child(umtopo, tmp_path, package_dir, hip=True)
    assert r["allocated"] is True
    assert r["held_after_free"] == 1 << 20              # A's kernel pending: the block waits
    assert r["other_stream_gets_other_block"] is True   # not handed to B while A may read it
    assert r["events_created"] >= 1 and r["events_recorded"] >= 1  # a hipEvent marked A
    assert r["other_stream_reuses_after_completion"] is True  # B gets it, no empty_cache
    assert r["held_after_completion"] == 0
    assert r["current_device"] == 0                     # the thread's HIP device left as it was


def test_without_hip_the_block_waits_for_empty_cache(umtopo, tmp_path, package_dir):
    r = run_child(umtopo, tmp_path, package_dir, hip=False)
    assert r["allocated"] is True
    assert r["held_after_free"] == 1 << 20
    assert r["other_stream_gets_other_block"] is True
    assert r["other_stream_reuses_after_completion"] is False  # only A may reuse it
    assert r["held_after_completion"] == 1 << 20
