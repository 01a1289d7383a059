"""Binding each local rank of a multi-process job to its APU: CPUs, memory policy and GPU."""
import os

import torch

from .. import _lib, _snapshot_text
from ._common import UmemTorchError

# Launchers and the variables they set, in the order they are consulted.
RANK_VARIABLES = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                  "MPI_LOCALRANKID", "SLURM_LOCALID", "FLUX_TASK_LOCAL_ID")
SIZE_VARIABLES = ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE",
                  "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE")


def _from_env(names):
    for name in names:
        value = os.environ.get(name)
        if value not in (None, ""):
            try:
                return int(value), name
            except ValueError as e:
                raise UmemTorchError(f"bind_local_rank(): {name}={value!r} is not an integer") from e
    return None, None


def bind_local_rank(local_rank=None, local_size=None, topology=None, apply=True,
                    memory_policy="bind"):
    """Binds this process to the APU of its local rank: CPUs (sched_setaffinity), memory policy
    (set_mempolicy `memory_policy`: "bind", "preferred" or None) and the current GPU
    (torch.cuda.set_device). The rank comes from `local_rank` or the launcher's variables
    (RANK_VARIABLES: torchrun, Open MPI, MVAPICH, MPICH/Intel MPI, Slurm, Flux), the size
    likewise. `topology` (a snapshot dict, JSON text or file) computes the binding for that
    machine; applying it is refused then, as it describes another machine. Returns the binding
    as a dict: local_rank, local_size, numa_node, cpus, device, gpu_kfd_node, evidence, source.
    Call enable() first when umem is to be PyTorch's allocator: selecting the device initialises
    CUDA, after which PyTorch refuses to swap its allocator."""
    source = "argument"
    if local_rank is None:
        local_rank, source = _from_env(RANK_VARIABLES)
        if local_rank is None:
            raise UmemTorchError("bind_local_rank(): no local rank: pass local_rank or launch with "
                                 "torchrun, mpirun or srun (variables: "
                                 + ", ".join(RANK_VARIABLES) + ")")
    if local_size is None:
        local_size, _ = _from_env(SIZE_VARIABLES)
    if topology is not None and apply:
        raise UmemTorchError("bind_local_rank(): the given topology describes another machine (a "
                             "snapshot); pass apply=False to compute its binding, or no topology "
                             "to bind on this one")
    text = _snapshot_text(topology)
    binding = _lib.take_json(_lib.lib().umem_torch_rank_binding_json(
        None if text is None else text.encode(), int(local_rank), int(local_size or 0)))
    binding["source"] = source
    if apply:
        _apply_binding(binding, memory_policy)
    return binding


def _apply_binding(b, memory_policy):
    if b["cpus"]:
        try:
            os.sched_setaffinity(0, b["cpus"])
        except OSError as e:
            raise UmemTorchError(f"bind_local_rank(): cannot pin to CPUs of NUMA node "
                                 f"{b['numa_node']} ({e}); the launcher may have restricted this "
                                 "process to other CPUs (e.g. srun --cpu-bind)") from e
    if memory_policy:
        _lib.check(_lib.lib().umem_torch_set_memory_policy(b["numa_node"], memory_policy.encode()))
    if b["device"] >= 0 and torch.cuda.is_available():
        torch.cuda.set_device(b["device"])
