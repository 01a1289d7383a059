"""Loading a transformers Llama-architecture checkpoint (random init, about 2.1 GB in float32,
written with save_pretrained) onto GPU 0 four ways, each in a process of its own, the files in the
page cache (read once before):

  from_pretrained       transformers' own loader, device_map="cuda" (PyTorch's allocator)
  safetensors           safetensors.torch.load_file(device="cuda") for every shard into a model
                        built inside umem.torch.meta_parameters(), load_state_dict(assign=True)
                        (PyTorch's allocator)
  umem                  umem.torch.enable() (default configuration), the model built inside
                        meta_parameters(), load_into(model, folder, device="cuda")

Prints a markdown table: seconds to the tensors and to the model, peak extra host resident memory
(VmHWM less VmRSS before, peak reset through /proc/self/clear_refs), GPU memory used afterwards
(mem_get_info's drop) and at the peak (max_memory_reserved), how many parameters are not the
loaded tensors themselves (copies; the GPU memory used tells it for the loaders that assign), and whether the logits of a fixed input equal
from_pretrained's (torch.equal). Needs a GPU, transformers and safetensors.

    python3 bench/weights/gpu_checkpoint.py [--layers N] [--dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from load import status  # noqa: E402  (bench/weights/load.py: /proc/self/status in bytes)

METHODS = ("from_pretrained", "safetensors", "umem")


def config(layers):
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=2048, intermediate_size=5504, num_hidden_layers=layers,
                       num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                       max_position_embeddings=512, torch_dtype="float32")


def make(folder, layers):
    import torch
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(config(layers))
    model.save_pretrained(folder, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    files = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in files)
    for f in files:  # into the page cache, as for every method
        with open(os.path.join(folder, f), "rb") as fh:
            while fh.read(64 << 20):
                pass
    return params, files, size


def measure(method, folder, layers, logits_path):
    import torch
    import umem.torch as ut
    if method == "umem":
        ut.enable()
    import transformers
    from transformers import LlamaForCausalLM
    torch.empty(1, device="cuda")  # the CUDA context exists before the measurement
    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    torch.cuda.reset_peak_memory_stats()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    rss_before = status("VmRSS")
    t0 = time.perf_counter()
    loaded = None
    if method == "from_pretrained":
        model = LlamaForCausalLM.from_pretrained(folder, device_map="cuda", dtype=torch.float32)
        t_tensors = time.perf_counter() - t0
    else:
        with ut.meta_parameters():
            model = LlamaForCausalLM(config(layers))
        if method == "safetensors":
            from safetensors.torch import load_file
            loaded = {}
            for f in sorted(os.listdir(folder)):
                if f.endswith(".safetensors"):
                    loaded.update(load_file(os.path.join(folder, f), device="cuda:0"))
            t_tensors = time.perf_counter() - t0
            model.load_state_dict(loaded, assign=True)
            model.to("cuda")  # the computed buffers
        else:
            ut.load_into(model, folder, device="cuda")
            t_tensors = time.perf_counter() - t0
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak_rss = status("VmHWM") - rss_before
    loaded_ptrs = ({t.data_ptr() for t in loaded.values()} if loaded is not None else None)
    copies = (sum(p.data_ptr() not in loaded_ptrs for p in model.parameters())
              if loaded_ptrs is not None else None)
    model.eval()
    ids = torch.arange(64, device="cuda").view(1, 64) * 97 % 32000
    with torch.no_grad():
        torch.save(model(ids).logits.cpu(), logits_path)
    del loaded
    torch.cuda.synchronize()
    return {"t_tensors": t_tensors, "seconds": seconds, "peak_rss": peak_rss,
            "gpu_used": free_before - torch.cuda.mem_get_info()[0],
            "gpu_peak_reserved": torch.cuda.max_memory_reserved(),
            "params": sum(1 for _ in model.parameters()), "copies": copies,
            "transformers": transformers.__version__, "torch": torch.__version__}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dir", default=None, help="where to write the checkpoint (default: a temp folder)")
    a = p.parse_args()
    import torch
    with tempfile.TemporaryDirectory(dir=a.dir) as d:
        folder = os.path.join(d, "llama")
        params, files, size = make(folder, a.layers)
        print(f"checkpoint: {params / 1e6:.0f} M parameters, float32, {len(files)} file(s), "
              f"{size / 1e9:.2f} GB")
        rows = []
        for m in METHODS:
            logits = os.path.join(d, m.replace(" ", "_") + ".pt")
            r = subprocess.run([sys.executable, __file__, "--measure", m, folder, str(a.layers),
                                logits], capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                rows.append((m, None, r.stderr.strip().splitlines()[-1][:160] if r.stderr else "?"))
                continue
            rows.append((m, json.loads(r.stdout.strip().splitlines()[-1]), logits))
        ref = next((torch.load(x) for m, res, x in rows if m == "from_pretrained" and res), None)
        first = next((res for _, res, _ in rows if res), {})
        print(f"transformers {first.get('transformers')}, torch {first.get('torch')}")
        print("| method | s to tensors | s to model | peak extra host RSS | GPU used after | "
              "GPU peak reserved | params copied | logits equal |")
        print("|---|---|---|---|---|---|---|---|")
        gb = 1e9
        for m, res, x in rows:
            if res is None:
                print(f"| {m} | failed: {x} | | | | | | |")
                continue
            same = "yes" if ref is not None and torch.equal(torch.load(x), ref) else "NO"
            copied = "-" if res["copies"] is None else f"{res['copies']} of {res['params']}"
            print(f"| {m} | {res['t_tensors']:.2f} | {res['seconds']:.2f} | "
                  f"{res['peak_rss'] / gb:.2f} GB | {res['gpu_used'] / gb:.2f} GB | "
                  f"{res['gpu_peak_reserved'] / gb:.2f} GB | {copied} | {same} |")


if __name__ == "__main__":
    main()
