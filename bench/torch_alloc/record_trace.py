"""Records the allocation trace of one workload of workloads.py under PyTorch's own allocator (or,
with --allocator umem, umem's extension, which writes no S/s lines), in the trace format umem-trace-replay and the CCA replay read (a `# ` JSON metadata line, then
`op,id,size_bytes,stream` lines: a/f a block allocated / its free completed, S/s a segment the
allocator took from / gave back to the driver), so that a real training run can be replayed
through umem's pool on a machine without a GPU and through PyTorch's allocator on the GPU.

    python3 bench/torch_alloc/record_trace.py gpt2 --steps 30 --out trace_small_gpt2.csv.gz

Uses torch.cuda.memory._record_memory_history, so PYTORCH_CUDA_ALLOC_CONF is honoured (record with
the default configuration: with expandable segments the driver events are map/unmap, which the
format has no letter for)."""
import argparse
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

OPS = {"alloc": "a", "free_completed": "f", "segment_alloc": "S", "segment_free": "s"}


def events_of(snapshot):
    """The trace lines of the snapshot's device-0 events, ids dense in allocation order."""
    live, streams, lines, next_id = {}, {}, [], 0
    for e in snapshot["device_traces"][0]:
        op = OPS.get(e["action"])
        if op is None:
            continue
        stream = streams.setdefault(e.get("stream", 0), len(streams))
        if op == "a":
            live[e["addr"]] = next_id
            block = next_id
            next_id += 1
        elif op == "f":
            block = live.pop(e["addr"], None)
            if block is None:  # allocated before recording began
                continue
        else:
            block = -1
        lines.append(f"{op},{block},{e['size']},{stream}")
    return lines, len(live)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["gpt2", "llama", "resnet50"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--allocator", choices=["torch", "umem"], default="torch",
                   help="umem: umem's allocator extension records its own calls (no S/s lines)")
    p.add_argument("--out", required=True, help="the trace file to write (.csv.gz)")
    a = p.parse_args()
    import torch
    if a.allocator == "umem":
        import umem.torch as ut
        ut.enable()  # before the recording touches the allocator
    torch.cuda.memory._record_memory_history(max_entries=10_000_000, context=None)
    result = workloads.run(a.workload, a.allocator, None, a.steps)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    lines, live_at_end = events_of(snapshot)
    stats = torch.cuda.memory_stats()
    meta = {"workload": f"{a.workload}_train_small", "torch": torch.__version__,
            "device": torch.cuda.get_device_name(), "steps": a.steps, "events": len(lines),
            "live_at_end": live_at_end, "loss": result["losses"][-1],
            "cca_peak_allocated_bytes": stats["allocated_bytes.all.peak"],
            "cca_peak_reserved_bytes": stats["reserved_bytes.all.peak"],
            "cca_num_alloc_retries": stats["num_alloc_retries"],
            "cca_segment_allocs": sum(1 for x in lines if x[0] == "S"),
            "cca_num_device_alloc": stats["num_device_alloc"],
            "cca_num_device_free": stats["num_device_free"],
            "allocator": a.allocator, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "format": "op,id,size_bytes,stream; op a=alloc f=free(completed) S=CCA segment alloc "
                      "s=CCA segment free; sizes are the allocator's block sizes (rounded)"}
    with gzip.open(a.out, "wt") as f:
        f.write("# " + json.dumps(meta) + "\n")
        f.write("\n".join(lines) + "\n")
    print(json.dumps({k: meta[k] for k in ("workload", "events", "cca_peak_allocated_bytes",
                                            "cca_peak_reserved_bytes")}))


if __name__ == "__main__":
    main()
