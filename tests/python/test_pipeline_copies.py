"""The point of umem as PyTorch's CPU allocator on an MI300A (XNACK off, the default, and on): an
input pipeline (DataLoader -> pin_memory -> .to("cuda") -> model, inside zero_copy()) makes no
copy with umem, and the copies PyTorch makes today without it; with forked workers, what comes
back through shared memory. On the ROCr and HIP doubles; what is real and what stands in:
pipeline_copies_child.py."""
import pytest

from test_hip_interop import run_child

BATCHES = 8  # 256 samples, batch 32


@pytest.mark.parametrize("xnack", [False, True], ids=["xnack_off", "xnack_on"])
def test_with_umem_the_pipeline_makes_no_copy(umtopo, tmp_path, package_dir, xnack):
    r = run_child(umtopo, tmp_path, package_dir, xnack, "pipeline_copies_child.py", "umem", "0")
    assert r["batches"] == BATCHES and r["sum_ok"]
    assert r["batch_umem"] is True  # collated by PyTorch into umem memory
    assert r["copies"] == {"pin_memory": 0, "to": 0}, r["reasons"]
    assert r["model_copies"] == 0 and r["model_aliases"] == 2  # weight and bias
    assert r["aliases"] == 2 * BATCHES + 2
    assert r["same_memory"] is True  # what the model read is the batch's memory
    # Registered with HIP (hipHostRegister): PyTorch for ROCm's own pin_memory() returns the
    # batch itself, in the DataLoader's pin thread too.
    assert r["pinned_for_hip"] == [True] * BATCHES


def test_without_umem_each_batch_is_copied_twice_with_xnack_off(umtopo, tmp_path, package_dir):
    r = run_child(umtopo, tmp_path, package_dir, False, "pipeline_copies_child.py", "pytorch", "0")
    assert r["batch_umem"] is False and r["sum_ok"]
    assert r["copies"] == {"pin_memory": BATCHES, "to": BATCHES}
    assert r["model_copies"] == 2  # weight and bias
    assert r["pinned_for_hip"] == [False] * BATCHES  # PyTorch's pin_memory copies


@pytest.mark.parametrize("xnack", [False, True], ids=["xnack_off", "xnack_on"])
def test_forked_workers_allocate_host_memory_and_their_batches_are_aliased(
        umtopo, tmp_path, package_dir, xnack):
    # The batches are 8 KiB: registered with foreign_alias_min:0 (the next test keeps the default).
    # Workers fork after umem became the CPU allocator on the doubles (which refuse GPU runtime
    # calls from a forked child, as KFD does): their samples are host-only umem memory, and the
    # batches reach this process in shared memory, which umem did not allocate.
    r = run_child(umtopo, tmp_path, package_dir, xnack, "pipeline_copies_child.py", "umem", "2",
                  conf="foreign_alias_min:0")
    assert r["batches"] == BATCHES and r["sum_ok"]
    assert r["batch_umem"] is False
    assert r["model_copies"] == 0
    assert r["pinned_for_hip"] == [False] * BATCHES
    # Aliased in both: with XNACK on the GPU reaches shared memory in place (pin_memory returns
    # the batch itself); with XNACK off pin_memory returns an alias registered with HIP for its
    # life (pinned: PyTorch for ROCm's is_pinned() says so), released after the alias by the
    # releases' thread: hipHostUnregister waits for the GPU, and the loop does not.
    assert r["copies"] == {"pin_memory": 0, "to": 0}, r["reasons"]
    assert r["pinned_after_pin"] == [not xnack] * BATCHES
    assert r["last_batch_known"] == 0
    if not xnack:
        assert r["unregisters"] >= BATCHES and r["unregisters_on_this_thread"] == 0


def test_forked_workers_small_batches_are_copied_once_below_foreign_alias_min(
        umtopo, tmp_path, package_dir):
    # XNACK off, the default foreign_alias_min (4 MiB): an 8 KiB batch costs less to copy than to
    # register, so the pin step copies it once, saying why.
    r = run_child(umtopo, tmp_path, package_dir, False, "pipeline_copies_child.py", "umem", "2")
    assert r["batches"] == BATCHES and r["sum_ok"]
    assert r["copies"] == {"pin_memory": BATCHES, "to": 0}
    assert r["reasons"] == ["the GPU cannot access it"]
    assert all("smaller than foreign_alias_min" in t for t in r["reason_texts"]), r["reason_texts"]
    assert r["pinned_after_pin"] == []  # PyTorch's own pin_memory (a copy) cannot run here
