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


def test_the_installed_package_needs_no_environment():
    """`pip install .` gives a package that finds its library and runs umtopo by itself."""
    import shutil
    import subprocess
    import sys

    import pytest
    if os.environ.get("UMEM_TEST_INSTALLED") != "1":
        pytest.skip("not testing an installed package (UMEM_TEST_INSTALLED=1 after pip install .)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UMEM_", "PYTHONPATH"))}
    code = ("import os, umem; lib = umem._lib.library_path(); "
            "assert os.path.dirname(lib) == os.path.dirname(umem.__file__), lib; "
            "print(len(umem.topology()['numa']['nodes']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd="/", timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) >= 1
    umtopo = shutil.which("umtopo", path=os.path.dirname(sys.executable))
    assert umtopo, "pip installs the umtopo command beside the interpreter"
    r = subprocess.run([umtopo, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"numa"' in r.stdout


def test_enable_keywords_become_umem_alloc_conf_keys():
    import umem.torch as ut
    conf = ut.enabling._conf("spill:warn", {"limit_node0": "64GiB", "limit_device1": "0.5",
                                   "limit_total": "0.9", "huge_pages": False})
    assert conf == "spill:warn,limit.node0:64GiB,limit.device1:0.5,limit.total:0.9,huge_pages:false"
