"""One rank under torchrun: binds to its APU/GPU with umem, enables umem as the allocator, and
all-reduces a tensor that lives in umem memory. Prints one RESULT line per rank."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import umem.torch as ut  # noqa: E402

ut.enable()  # first: PyTorch's allocator cannot be swapped once CUDA is initialised
binding = ut.bind_local_rank()  # from LOCAL_RANK / LOCAL_WORLD_SIZE that torchrun sets
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
assert torch.cuda.current_device() == binding["device"], (torch.cuda.current_device(), binding)
assert os.sched_getaffinity(0) == set(binding["cpus"]), "CPUs pinned to the rank's NUMA node"
x = torch.full((1 << 20,), float(rank + 1), device="cuda")
assert ut.gpu_access(x)["umem"], "the NCCL buffer is umem memory"
dist.all_reduce(x)
expected = world * (world + 1) / 2
ok = bool(torch.all(x == expected).item())
print(f"RESULT rank={rank} world={world} device={binding['device']} node={binding['numa_node']} "
      f"source={binding['source']} allreduce={'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
