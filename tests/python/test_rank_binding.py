"""bind_local_rank computed on replayed real MI300A captures (4 sockets)."""
import json
import subprocess

import pytest

import umem.torch as ut

ROCMINFO = "rocminfo_mi300a_4socket_supermicro_h13qsh_ROCm-ROCm_4688.txt"
NUMACTL = "numactl_mi300a_4socket_mzank_gpu-benchmarks-hip.txt"


@pytest.fixture
def mi300a_snapshot(tmp_path, umtopo, fixture_file):
    snap = tmp_path / "mi300a.json"
    subprocess.run([umtopo, "--rocminfo", fixture_file(ROCMINFO), "--numactl",
                    fixture_file(NUMACTL), "--capture", str(snap)], check=True,
                   capture_output=True)
    return str(snap)


def cpus(*ranges):
    return [c for a, b in ranges for c in range(a, b + 1)]


# numactl capture, "node N cpus:" lines: node 0 0-23 96-119, node 1 24-47 120-143,
# node 2 48-71 144-167, node 3 72-95 168-191. rocminfo: GPU agents are KFD nodes 4-7
# ("Node: 4" .. "Node: 7"), one per CPU agent 0-3.
EXPECTED = {
    0: cpus((0, 23), (96, 119)),
    1: cpus((24, 47), (120, 143)),
    2: cpus((48, 71), (144, 167)),
    3: cpus((72, 95), (168, 191)),
}


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_four_ranks_get_their_own_apu(mi300a_snapshot, rank, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    b = ut.bind_local_rank(topology=mi300a_snapshot, apply=False)
    assert b["numa_node"] == rank
    assert b["device"] == rank
    assert b["gpu_kfd_node"] == 4 + rank
    assert b["cpus"] == EXPECTED[rank]
    assert b["source"] == "LOCAL_RANK"


@pytest.mark.parametrize("var", ["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                 "MPI_LOCALRANKID"])
def test_mpi_and_slurm_variables(mi300a_snapshot, var, monkeypatch):
    for v in ut.RANK_VARIABLES + ut.SIZE_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv(var, "2")
    b = ut.bind_local_rank(topology=mi300a_snapshot, apply=False)
    assert (b["numa_node"], b["device"], b["source"]) == (2, 2, var)


def test_eight_ranks_pair_up_on_sockets(mi300a_snapshot):
    nodes = [ut.bind_local_rank(r, 8, topology=mi300a_snapshot, apply=False)["numa_node"]
             for r in range(8)]
    assert nodes == [0, 0, 1, 1, 2, 2, 3, 3]


def test_snapshot_dict_works_too(mi300a_snapshot):
    with open(mi300a_snapshot) as f:
        topo = json.load(f)
    assert ut.bind_local_rank(3, 4, topology=topo, apply=False)["cpus"] == EXPECTED[3]


def test_applying_a_foreign_snapshot_is_refused(mi300a_snapshot):
    with pytest.raises(ut.UmemTorchError, match="another machine"):
        ut.bind_local_rank(0, 4, topology=mi300a_snapshot, apply=True)


def test_rank_outside_local_size_is_refused(mi300a_snapshot):
    with pytest.raises(Exception, match="local rank 4"):
        ut.bind_local_rank(4, 4, topology=mi300a_snapshot, apply=False)


def test_no_rank_anywhere_says_which_variables(monkeypatch):
    for v in ut.RANK_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(ut.UmemTorchError, match="LOCAL_RANK"):
        ut.bind_local_rank(apply=False)


def test_binding_this_machine_without_gpus_uses_numa_nodes():
    import os
    import umem
    if any(a["kind"] == "gpu" for a in umem.topology()["agents"]):
        pytest.skip("this machine has GPUs in its topology")
    b = ut.bind_local_rank(0, 1, apply=False)
    assert b["device"] == -1 and b["numa_node"] == 0
    assert set(os.sched_getaffinity(0)) <= set(b["cpus"])
