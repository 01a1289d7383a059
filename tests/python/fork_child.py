"""Run by test_fork.py in a fresh process: forks while another thread allocates umem CPU tensors
(Note [Fork] in fork_safety.hpp), then a DataLoader with fork workers over umem tensors. Prints one
JSON line. argv: package folder, number of forks."""
import json
import os
import signal
import sys
import threading

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402
import umem.torch as ut  # noqa: E402

forks = int(sys.argv[2])
stop = threading.Event()


def churn():
    # Small and large blocks, thread cache hits and the pools' locked paths, and trims.
    n = 0
    while not stop.is_set():
        a = ut.empty(1 << 12, dtype=torch.uint8)
        b = ut.empty(3 << 20, dtype=torch.uint8)
        del a, b
        n += 1
        if n % 64 == 0:
            ut.empty_cache()


inherited = ut.empty(1 << 20, dtype=torch.uint8).fill_(7)
worker = threading.Thread(target=churn)
worker.start()
failed = []
for i in range(forks):
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)  # a hang ends as SIGALRM, counted below
        # What a DataLoader worker does first (torch/utils/data/_utils/worker.py, _worker_loop:
        # torch.set_num_threads(1)): an OpenMP thread pool the parent used does not survive fork
        # (GNU OpenMP, Debian's PyTorch builds, hangs in the child's first parallel region).
        torch.set_num_threads(1)
        ok = int(inherited[0]) == 7 and int(inherited[-1]) == 7
        x = ut.empty(1 << 20, dtype=torch.uint8).fill_(1)
        y = ut.empty(5 << 20, dtype=torch.uint8).fill_(2)
        ok = ok and int(x.sum()) == 1 << 20 and int(y[-1]) == 2
        del x, y
        ut.empty_cache()
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        failed.append(os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
stop.set()
worker.join()
parent_ok = int(ut.empty(1 << 20, dtype=torch.uint8).fill_(5).sum()) == 5 << 20


class UmemTensors(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        t = ut.empty(1024, dtype=torch.float32)  # allocated in the worker, by umem
        return t.fill_(float(i))


loader = torch.utils.data.DataLoader(UmemTensors(), batch_size=8, num_workers=4,
                                     multiprocessing_context="fork", timeout=60)
sums = sorted(float(b.sum()) for b in loader)
print(json.dumps({"failed": failed, "parent_ok": parent_ok, "batch_sums": sums}))
