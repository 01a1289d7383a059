"""What PyTorch for ROCm does to a tensor's memory (fill, clone, .cuda(), .cpu(), free,
empty_cache) must be accepted by HIP's pointer rules (Note [GPU visibility under HIP] in
allocator/include/umem/allocator/gpu/hip_gpu_mapper.hpp): the bridge on the ROCr double serving a
one-socket MI300A, with the HIP double, which follows clr's rules, mapped first and attached to it.
XNACK off (the MI300A default) and on. Each run is a fresh process. Environment (the ctest entry
sets it): UMEM_ROCR_DOUBLE, UMEM_HIP_DOUBLE."""
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


def claim_xnack_on(snapshot):
    """What ROCr reports with HSA_XNACK=1 before hsa_init: XNACK_ENABLED, SVM accessible by
    default, and the ISA's xnack+ (the capture itself has xnack-)."""
    snapshot["hsa"]["xnack_enabled"] = True
    snapshot["hsa"]["svm_accessible_by_default"] = True
    for a in snapshot["agents"]:
        a["isas"] = [i.replace(":xnack-", ":xnack+") for i in a.get("isas", [])]


def run_child(umtopo, tmp_path, package_dir, xnack, child="hip_interop_child.py", *args, conf=None):
    """Runs `child` (argv: package root, HIP double, ROCr double, args) on the doubles serving the
    capture's MI300A, XNACK as asked, with UMEM_ALLOC_CONF `conf` (None: unset); returns the JSON
    of its last line."""
    for var in ("UMEM_ROCR_DOUBLE", "UMEM_HIP_DOUBLE"):
        if not os.environ.get(var):
            pytest.skip(f"{var} is not set (the ctest entry points it at the test double)")
    made = subprocess.run([umtopo, "--rocminfo", CAPTURE, "--json"], capture_output=True,
                          text=True, check=True, timeout=60)
    snapshot = json.loads(made.stdout)
    if xnack:
        claim_xnack_on(snapshot)
    path = tmp_path / "apu.json"
    path.write_text(json.dumps(snapshot))
    env = dict(os.environ, UMEM_GPU_BACKEND="rocr",
               UMEM_HSA_RUNTIME_LIB=os.environ["UMEM_ROCR_DOUBLE"],
               UMEM_ROCR_DOUBLE_SNAPSHOT=str(path),
               UMEM_HIP_RUNTIME_LIB=os.environ["UMEM_HIP_DOUBLE"])
    env.pop("UMEM_ALLOC_CONF", None)
    if conf is not None:
        env["UMEM_ALLOC_CONF"] = conf
    run = subprocess.run([sys.executable, os.path.join(HERE, child), package_dir,
                          os.environ["UMEM_HIP_DOUBLE"], os.environ["UMEM_ROCR_DOUBLE"], *args],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("xnack", [False, True], ids=["xnack_off", "xnack_on"])
def test_hip_accepts_every_byte_umem_hands_pytorch(umtopo, tmp_path, package_dir, xnack):
    # Every size of foreign memory is registered (the alias below is 12 KiB).
    r = run_child(umtopo, tmp_path, package_dir, xnack, conf="foreign_alias_min:0")
    assert "registered with HIP" in r["describe"], r["describe"]
    assert r["registered"] == [1, 1]  # objects of HIP's map, not the arena
    assert r["host_registered"] == 1
    # hipSuccess for every call PyTorch makes (hipErrorInvalidValue, 1, without registration).
    for call in ("memset", "copy_d2d", "copy_h2d", "copy_d2h", "copy_to_host_tensor"):
        assert r[call] == 0, call
    assert r["copied"] and r["round_trip"]
    assert r["cpu_copies"] == 0  # no copy fell back to the CPU
    assert r["registrations_on_cached_path"] == 0
    assert r["released"] > 0
    assert r["known_after_empty_cache"] == [0, 0]
    assert r["live_registrations"] == 0

    # Memory umem did not allocate: aliased on the GPU, registered with HIP for the alias's life;
    # with XNACK off that registration (a lock) is what lets the GPU reach it at all.
    access = r["foreign_access"]
    assert access["umem"] is False
    assert access["accessible"] is xnack
    assert access["registrable"] is not xnack, access["reason"]
    assert r["alias_status"] == 0, r["alias_error"]
    assert r["alias_known"] == 1
    assert r["alias_memset"] == 0
    assert r["alias_known_after_release"] == 0
    # Read-only pages cannot be pinned (KFD's userptr path asks for write access): refused with
    # the reason, nothing registered, and zero_copy() copies instead.
    assert r["read_only_status"] == 5, r["read_only_error"]  # UMEM_ERR_UNSUPPORTED
    assert "pins only writable memory" in r["read_only_error"], r["read_only_error"]
    assert r["read_only_known"] == 0


@pytest.mark.parametrize("xnack", [False, True], ids=["xnack_off", "xnack_on"])
def test_zero_copy_registers_numpy_memory_and_copies_a_read_only_map(umtopo, tmp_path, package_dir,
                                                                      xnack):
    r = run_child(umtopo, tmp_path, package_dir, xnack, "foreign_memory_child.py", str(tmp_path))
    assert r["access"]["umem"] is False
    assert r["access"]["registrable"] is not xnack
    if xnack:  # the GPU uses it in place already: pin_memory returns the tensor itself
        assert r["events"] == [["pin_memory", "alias", "GPU-usable in place: the tensor itself"]]
        assert r["pinned_for_hip"] is False and r["known_while_aliased"] == 0
    else:  # an alias registered with HIP (pinned) for its life, then released
        assert r["events"] == [["pin_memory", "alias",
                                "registered with the GPU runtime for the alias's life"]]
        assert r["pinned_for_hip"] is True and r["known_while_aliased"] == 1
    assert r["same_memory"] and r["numpy_sees_write"]
    assert r["known_after"] == 0
    if not xnack:  # released on the releases' thread, which waits for the GPU, not the caller
        assert r["unregisters"] >= 1 and r["unregisters_on_this_thread"] == 0
    # Below foreign_alias_min (4 MiB by default) foreign memory is copied where it would need a
    # registration to be reached (XNACK off); with XNACK on it is aliased whatever its size.
    [(operation, kind, reason)] = r["small_events"]
    assert operation == "pin_memory"
    if xnack:
        assert kind == "alias"
    else:
        assert kind == "copy" and "smaller than foreign_alias_min" in reason, reason
    if not xnack:  # KFD cannot pin read-only pages: copied, with the reason
        [(operation, kind, reason)] = r["read_only_events"]
        assert (operation, kind) == ("pin_memory", "copy")
        assert "pins only writable memory" in reason, reason
        assert r["read_only_known"] == 0
        assert "would copy" in r["strict"] and "pins only writable memory" in r["strict"]
