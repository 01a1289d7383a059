"""umem.torch.load_safetensors(device="cuda") on a real GPU, umem enabled (conftest.py's umem_gpu):
the tensors equal the file's; on a discrete GPU they are the GPU's own memory, filled through two
small pinned buffers, so host memory never holds the file (peak resident memory checked through
/proc/self/clear_refs); files written here after the format and, where installed, by the
safetensors package itself."""
import os

import pytest
import torch

import umem
import umem.torch as ut
from test_weights import sample, write_safetensors

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("umem_gpu")]


def device_memory():
    return umem._lib.take_json(umem._lib.lib().umem_torch_device_json(0))["memory"]


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.parametrize("direct_io", [False, True])
def test_every_tensor_lands_on_the_gpu_equal_to_the_file(tmp_path, direct_io):
    src = sample()
    path = write_safetensors(tmp_path / "m.safetensors", src)
    try:
        got = ut.load_safetensors(path, device="cuda", direct_io=direct_io, threads=3)
    except umem.UmemError as e:
        if direct_io and "O_DIRECT" in str(e):
            pytest.skip(f"this file system refuses O_DIRECT: {e}")
        raise
    assert sorted(got) == sorted(src)
    for name, t in src.items():
        assert got[name].device == torch.device("cuda", 0), name
        assert torch.equal(got[name].cpu(), t), name
    if device_memory() == "device":
        for name in ("w", "b16", "odd", "mask"):  # views of the file's device block
            assert ut.gpu_access(got[name])["host_accessible"] is False, name


def test_dtype_converts_on_the_gpu(tmp_path):
    src = sample()
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src), device="cuda",
                              dtype=torch.bfloat16)
    assert got["w"].dtype == torch.bfloat16 and got["w"].is_cuda
    assert torch.equal(got["w"].cpu(), src["w"].to(torch.bfloat16))
    assert got["ids"].dtype == torch.int64 and torch.equal(got["ids"].cpu(), src["ids"])


def test_a_large_file_never_sits_in_host_memory_on_a_discrete_gpu(tmp_path):
    if device_memory() != "device":
        pytest.skip("GPU 0 is unified: its tensors are host memory by design (one copy, in place)")
    n = 1 << 28  # 1 GiB of int32
    src = {"big": torch.arange(n, dtype=torch.int32), "tail": torch.ones(5)}
    path = write_safetensors(tmp_path / "big.safetensors", src)
    del src
    torch.cuda.synchronize()
    before = status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # peak resident memory := current (Linux >= 4.0)
    got = ut.load_safetensors(path, device="cuda")
    torch.cuda.synchronize()
    extra_mib = (status_kib("VmHWM") - before) / 1024
    print(f"peak extra resident memory {extra_mib:.0f} MiB for a 1024 MiB file")
    assert extra_mib < 400, f"host memory held {extra_mib:.0f} MiB of a 1024 MiB file"
    assert got["big"][-1].item() == n - 1 and got["big"][12345].item() == 12345
    assert torch.equal(got["tail"].cpu(), torch.ones(5))


def test_files_written_by_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.torch", reason="the safetensors package is not here")
    src = sample()
    src.pop("empty")  # keep to what every safetensors version writes
    st.save_file(src, str(tmp_path / "s.safetensors"), metadata={"format": "pt"})
    got = ut.load_safetensors(tmp_path / "s.safetensors", device="cuda")
    theirs = st.load_file(str(tmp_path / "s.safetensors"), device="cuda:0")
    assert sorted(got) == sorted(theirs)
    for name in theirs:
        assert torch.equal(got[name], theirs[name]), name


def test_load_into_a_transformers_model_built_on_meta(tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=512,
                                     n_positions=64)
    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(config).eval()
    ref.save_pretrained(tmp_path / "gpt2", safe_serialization=True)
    ref = ref.cuda()
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(config).eval()
    try:
        ut.load_into(model, tmp_path / "gpt2", device="cuda")
    except ut.UmemTorchError as e:
        pytest.fail(f"load_into refused a meta-built GPT-2: {e}")
    assert model.lm_head.weight is model.transformer.wte.weight
    ids = torch.arange(32, device="cuda").view(1, 32)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)


def test_load_into_a_llama_built_with_meta_parameters_holds_the_weights_once(tmp_path):
    """Llama computes non-persistent buffers (rotary inv_freq): meta_parameters() keeps them real
    while the parameters cost nothing until load_into gives them the loaded tensors."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      vocab_size=1024, max_position_embeddings=128)
    torch.manual_seed(0)
    ref = transformers.LlamaForCausalLM(config).eval()
    ref.save_pretrained(tmp_path / "llama", safe_serialization=True)
    ref = ref.cuda()
    file_bytes = sum(f.stat().st_size for f in (tmp_path / "llama").glob("*.safetensors"))
    with ut.meta_parameters():
        model = transformers.LlamaForCausalLM(config).eval()
    assert all(p.is_meta for p in model.parameters())
    assert not any(b.is_meta for b in model.buffers())
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    ut.load_into(model, tmp_path / "llama", device="cuda")
    grown = torch.cuda.memory_allocated() - before
    assert file_bytes * 0.95 < grown < file_bytes * 1.05 + (1 << 20), (grown, file_bytes)
    ids = torch.arange(48, device="cuda").view(1, 48)
    with torch.no_grad():
        assert torch.equal(model(ids).logits, ref(ids).logits)
