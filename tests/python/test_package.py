"""The package imports without a GPU and describes this machine."""
import glob
import os

import umem


def test_import_and_library_found():
    assert umem._lib.lib() is not None
    assert os.path.exists(umem._lib.library_path())


def test_topology_matches_sysfs():
    topo = umem.topology()
    # The live model's NUMA nodes are the kernel's.
    sys_nodes = sorted(int(p.rsplit("node", 1)[1])
                       for p in glob.glob("/sys/devices/system/node/node[0-9]*"))
    assert [n["os_index"] for n in topo["numa"]["nodes"]] == sys_nodes
    cpus = sorted(c for n in topo["numa"]["nodes"] for c in n["cpus"])
    assert set(os.sched_getaffinity(0)) <= set(cpus)


def test_topology_of_a_bad_snapshot_names_the_problem():
    try:
        umem.topology({"schema_version": 999})
    except umem.UmemError as e:
        assert "snapshot" in str(e)
    else:
        raise AssertionError("a snapshot with a wrong schema version was accepted")
