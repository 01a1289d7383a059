"""umem.torch.load_safetensors (Note [safetensors format], Note [Reading weights]): files written
here byte by byte after the format's specification, read back equal, into umem memory, one block
per file; sharded checkpoints and folders; every broken rule an error naming file, tensor, rule."""
import gc
import json
import struct

import pytest
import torch

import umem
import umem.torch as ut


def write_safetensors(path, tensors, metadata=None, edit=None, data_tail=b""):
    """Writes `tensors` ({name: tensor}) in this order, without padding between them. `edit`
    changes the header dict before it is written; `data_tail` is appended to the data."""
    header, blobs, at = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    if edit:
        edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs) + data_tail)
    return path


DTYPE_NAMES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
               torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32", torch.int16: "I16",
               torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def sample():
    g = torch.Generator().manual_seed(0)
    return {"w": torch.randn(4, 5, generator=g),
            "b16": torch.randn(7, generator=g).to(torch.bfloat16),
            "odd": torch.arange(3, dtype=torch.uint8),          # 3 bytes: what follows is unaligned
            "ids": torch.arange(6, dtype=torch.int64).view(2, 3),
            "half": torch.tensor(1.5, dtype=torch.float16),      # a scalar: shape []
            "mask": torch.tensor([True, False, True]),
            "empty": torch.zeros(0, 4)}


def test_every_tensor_comes_back_equal_in_umem_memory(tmp_path):
    src = sample()
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src), threads=3)
    assert sorted(got) == sorted(src)
    for name, t in src.items():
        assert got[name].dtype == t.dtype and got[name].shape == t.shape, name
        assert torch.equal(got[name], t), name
    # Views of the file's umem block, except where view(dtype) needs an aligned offset: "ids"
    # starts at byte 97 (after the 3 bytes of "odd"), so it is the one copy.
    for name in ("w", "b16", "odd", "mask"):
        assert ut.gpu_access(got[name])["umem"] is True, name
    assert ut.gpu_access(got["ids"])["umem"] is False


def test_a_unified_gpu_target_aliases_the_blocks_views_asking_the_bridge_once_per_file(
        tmp_path, monkeypatch):
    # A stand-in for a unified GPU that can use any memory in place (no GPU here): every tensor is
    # aliased. The block is asked about once for all its views; only the tensors outside it (the
    # copies of "ids" and "half", at unaligned offsets, and the empty one) are asked about alone.
    import umem.torch.weights as w
    asked, aliased = [], []
    monkeypatch.setattr(w, "_gpu_target", lambda device: (torch.device("cuda", 0),
                                                          {"memory": "host", "numa_node": 0}))
    monkeypatch.setattr(w, "gpu_access", lambda t: asked.append(t) or {"accessible": True})

    def alias(t, device=None):
        aliased.append(device)
        return t.detach()

    monkeypatch.setattr(w, "_device_alias", alias)
    src = sample()
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src), device="cuda")
    assert [t.numel() for t in asked] == [sum(t.numel() * t.element_size() for t in src.values()),
                                          src["ids"].numel(), src["half"].numel(), 0]
    assert aliased == [torch.device("cuda", 0)] * len(src)
    for name, t in src.items():
        assert torch.equal(got[name], t), name


def test_the_tensors_keep_their_block_alive(tmp_path):
    src = sample()
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src))
    w = got["w"]
    del got
    gc.collect()
    filler = [ut.empty(1 << 16) for _ in range(8)]  # would reuse the block if it had been freed
    assert torch.equal(w, src["w"])
    del filler


def test_dtype_converts_floating_point_tensors_only(tmp_path):
    src = sample()
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src),
                              dtype=torch.float16)
    assert got["w"].dtype == torch.float16 and torch.equal(got["w"], src["w"].half())
    assert got["b16"].dtype == torch.float16
    assert got["ids"].dtype == torch.int64 and torch.equal(got["ids"], src["ids"])


def test_a_node_and_metadata_are_accepted(tmp_path):
    src = {"w": torch.ones(1024)}
    got = ut.load_safetensors(write_safetensors(tmp_path / "m.safetensors", src,
                                                metadata={"format": "pt"}), node=0)
    assert torch.equal(got["w"], src["w"])
    r = ut.residency(got["w"])
    assert r["policy"] == {"mode": "bind", "nodes": [0]}
    assert set(r["pages"]["per_node"]) == {"0"}


def test_direct_io_reads_the_same_bytes_or_says_why_it_cannot(tmp_path):
    g = torch.Generator().manual_seed(1)
    src = {"a": torch.randn(3, 1000, generator=g), "b": torch.randn(12345, generator=g)}
    path = write_safetensors(tmp_path / "m.safetensors", src)
    try:
        got = ut.load_safetensors(path, direct_io=True, threads=2)
    except umem.UmemError as e:  # a file system without O_DIRECT (tmpfs)
        assert "O_DIRECT" in str(e)
        return
    for name, t in src.items():
        assert torch.equal(got[name], t), name


def test_a_sharded_checkpoint_by_its_index_or_its_folder(tmp_path):
    src = sample()
    names = list(src)
    first = {n: src[n] for n in names[:3]}
    second = {n: src[n] for n in names[3:]}
    write_safetensors(tmp_path / "model-00001-of-00002.safetensors", first)
    write_safetensors(tmp_path / "model-00002-of-00002.safetensors", second)
    index = {"metadata": {}, "weight_map": {**{n: "model-00001-of-00002.safetensors" for n in first},
                                            **{n: "model-00002-of-00002.safetensors" for n in second}}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    for path in (tmp_path / "model.safetensors.index.json", tmp_path):
        got = ut.load_safetensors(path)
        assert sorted(got) == sorted(src)
        assert all(torch.equal(got[n], src[n]) for n in src)


def test_a_broken_index_is_an_error_naming_what_is_wrong(tmp_path):
    write_safetensors(tmp_path / "a.safetensors", {"x": torch.ones(2)})
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}}))
    with pytest.raises(umem.UmemError, match=r"shard .*b\.safetensors \(of tensor 'y'\) does not exist"):
        ut.load_safetensors(index)
    index.write_text(json.dumps({"weight_map": {"x": "a.safetensors", "y": "a.safetensors"}}))
    with pytest.raises(ut.UmemTorchError, match=r"names tensor 'y' in .*a\.safetensors, which does not hold it"):
        ut.load_safetensors(index)
    index.write_text("[1, 2]")
    with pytest.raises(umem.UmemError, match=r"no \"weight_map\" object"):
        ut.load_safetensors(index)
    (tmp_path / "second.safetensors.index.json").write_text("{}")
    with pytest.raises(umem.UmemError, match=r"holds 2 \*\.safetensors\.index\.json files"):
        ut.load_safetensors(tmp_path)
    with pytest.raises(umem.UmemError, match=r"no such file or folder"):
        ut.load_safetensors(tmp_path / "missing.safetensors")


def _set(name, key, value):
    def edit(h):
        h[name][key] = value
    return edit


BROKEN = [
    ("unknown dtype", _set("w", "dtype", "F12"), b"", r"tensor 'w': unknown dtype \"F12\""),
    ("shape and bytes disagree", _set("w", "shape", [4, 6]), b"",
     r"tensor 'w': shape \[4,6\] of F32 needs 96 bytes, but \"data_offsets\" \[0,80\] hold 80"),
    ("negative dimension", _set("w", "shape", [-4, 5]), b"",
     r"tensor 'w': every dimension of \"shape\" must be a non-negative integer"),
    ("offsets reversed", _set("w", "data_offsets", [80, 0]), b"", r"ends before it begins"),
    ("overlap", _set("b", "data_offsets", [76, 84]), b"", r"overlap those of 'w'"),
    ("hole", _set("b", "data_offsets", [84, 92]), b"", r"has a hole: bytes \[80, 84\)"),
    ("past the end", _set("b", "data_offsets", [80, 96]), b"",
     r"tensor 'b'.*shape \[2\] of F32 needs 8 bytes"),
    ("trailing bytes", None, b"\0" * 5, r"the last 5 bytes of the data section belong to no tensor"),
    ("no dtype", lambda h: h["w"].pop("dtype"), b"", r"tensor 'w': no \"dtype\" string"),
    ("metadata not strings", lambda h: h.update({"__metadata__": {"n": 1}}), b"",
     r"\"__metadata__\" entry \"n\" must be a string"),
]


@pytest.mark.parametrize("what,edit,tail,message", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_file_breaking_a_rule_is_an_error_naming_file_tensor_and_rule(tmp_path, what, edit,
                                                                         tail, message):
    path = write_safetensors(tmp_path / "bad.safetensors",
                             {"w": torch.ones(4, 5), "b": torch.ones(2)}, edit=edit, data_tail=tail)
    with pytest.raises(umem.UmemError, match=message) as e:
        ut.load_safetensors(path)
    assert "bad.safetensors" in str(e.value)


def test_truncated_and_foreign_files_are_errors(tmp_path):
    good = write_safetensors(tmp_path / "good.safetensors", {"w": torch.ones(100)})
    data = good.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-10])
    with pytest.raises(umem.UmemError, match=r"past the data section's 390 bytes \(a truncated file\?\)"):
        ut.load_safetensors(tmp_path / "cut.safetensors")
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(umem.UmemError, match=r"2 bytes, shorter than the 8-byte header size"):
        ut.load_safetensors(tmp_path / "short.safetensors")
    (tmp_path / "zip.safetensors").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(umem.UmemError, match=r"the header claims [0-9]+ bytes"):
        ut.load_safetensors(tmp_path / "zip.safetensors")
    (tmp_path / "json.safetensors").write_bytes(struct.pack("<Q", 4) + b"nope")
    with pytest.raises(umem.UmemError, match=r"the header is not valid JSON"):
        ut.load_safetensors(tmp_path / "json.safetensors")


class Tied(torch.nn.Module):
    """An embedding and a head sharing one weight, a buffer, a bias: what language models have."""

    def __init__(self, device=None):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4, device=device)
        self.hidden = torch.nn.Linear(4, 4, device=device)
        self.head = torch.nn.Linear(4, 10, bias=False, device=device)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.ones(4, device=device))

    def forward(self, ids):
        return self.head(self.hidden(self.embed(ids)) * self.scale)


def test_load_into_fills_a_meta_model_once_and_keeps_tied_weights_tied(tmp_path):
    torch.manual_seed(0)
    ref = Tied()
    saved = {"embed.weight": ref.embed.weight.detach(), "hidden.weight": ref.hidden.weight.detach(),
             "hidden.bias": ref.hidden.bias.detach(), "scale": ref.scale}  # head.weight omitted
    path = write_safetensors(tmp_path / "m.safetensors", saved)
    model = ut.load_into(Tied(device="meta"), path)
    assert model.head.weight is model.embed.weight, "the tie survives"
    assert isinstance(model.hidden.bias, torch.nn.Parameter) and model.hidden.bias.requires_grad
    for p in model.parameters():
        assert ut.gpu_access(p)["umem"] is True  # the loaded block itself, no copy
    ids = torch.tensor([1, 2, 3])
    assert torch.equal(model(ids), ref(ids))
    before = model.hidden.weight.detach().clone()
    model(ids).sum().backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    assert not torch.equal(model.hidden.weight.detach(), before), "training changes umem memory"


def test_load_into_says_what_does_not_match(tmp_path):
    torch.manual_seed(0)
    ref = Tied()
    path = write_safetensors(tmp_path / "m.safetensors",
                             {"embed.weight": ref.embed.weight.detach(),
                              "extra": torch.ones(2)})
    with pytest.raises(ut.UmemTorchError,
                       match=r"missing \['hidden.bias', 'hidden.weight', 'scale'\]; "
                             r"unexpected \['extra'\]"):
        ut.load_into(Tied(device="meta"), path)
    model = ut.load_into(Tied(), path, strict=False)
    assert torch.equal(model.embed.weight, ref.embed.weight)


class WithRotary(torch.nn.Module):
    """A parameter and a non-persistent buffer that the module computes (as rotary embeddings
    do): checkpoints never hold such a buffer."""

    def __init__(self, device=None):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4, bias=False, device=device)
        self.register_buffer("inv_freq", torch.arange(4.0, device=device) + 1, persistent=False)

    def forward(self, x):
        return self.proj(x) * self.inv_freq


def test_load_into_keeps_non_persistent_buffers_and_refuses_them_on_meta(tmp_path):
    torch.manual_seed(0)
    ref = WithRotary()
    path = write_safetensors(tmp_path / "m.safetensors", {"proj.weight": ref.proj.weight.detach()})
    with pytest.raises(ut.UmemTorchError,
                       match=r"the non-persistent buffers \['inv_freq'\] are on the meta device"):
        ut.load_into(WithRotary(device="meta"), path)
    model = WithRotary(device="meta")
    model.inv_freq = torch.arange(4.0) + 1  # what the model computes when it is not on meta
    ut.load_into(model, path)  # strict: inv_freq is not expected in the checkpoint
    x = torch.randn(2, 4)
    assert torch.equal(model(x), ref(x))
    assert ut.gpu_access(model.proj.weight)["umem"] is True


def test_the_c_abi_gives_a_files_layout_and_reads_any_range_of_it(tmp_path):
    """What a discrete GPU's staged load stands on (it needs a GPU: test_gpu_weights.py)."""
    import ctypes
    import os
    path = write_safetensors(tmp_path / "m.safetensors", sample())
    raw = path.read_bytes()
    lib = umem._lib.lib()
    name = os.fsencode(path)
    layout = umem._lib.take_json(lib.umem_torch_safetensors_layout_json(name))
    assert layout["data_offset"] == 8 + struct.unpack("<Q", raw[:8])[0]
    assert layout["data_bytes"] == len(raw) - layout["data_offset"]
    assert sorted(t["name"] for t in layout["tensors"]) == sorted(sample())
    buf = ctypes.create_string_buffer(len(raw))
    umem._lib.check(lib.umem_torch_read_file(name, 3, len(raw) - 3, buf, 0, 2, 0))
    assert buf.raw[:len(raw) - 3] == raw[3:]
    with pytest.raises(umem.UmemError, match=r"run past its end at " + str(len(raw))):
        umem._lib.check(lib.umem_torch_read_file(name, len(raw) - 1, 2, buf, -1, 0, 0))
    with pytest.raises(umem.UmemError, match=r"NUMA node 99 is not a node of this machine"):
        umem._lib.check(lib.umem_torch_read_file(name, 0, 1, buf, 99, 0, 0))
    if not torch.cuda.is_available():
        with pytest.raises(umem.UmemError, match=r"the topology has 0 GPU\(s\)"):
            umem._lib.take_json(lib.umem_torch_device_json(0))


def test_meta_parameters_puts_only_parameters_on_meta_or_says_which_pytorch_it_needs():
    if not hasattr(torch.nn.modules.module, "register_module_parameter_registration_hook"):
        with pytest.raises(ut.UmemTorchError, match=r"PyTorch >= 2.0 has"):
            with ut.meta_parameters():
                pass
        return
    with ut.meta_parameters():
        model = WithRotary()
        tied = Tied()
    assert model.proj.weight.is_meta and not model.inv_freq.is_meta
    assert tied.head.weight is tied.embed.weight  # the tie survives registration
    assert not torch.nn.Linear(2, 2).weight.is_meta  # the hook is gone after the context


# Dtypes safetensors names that older PyTorch releases lack (1.13 has none of them; 2.3 added the
# unsigned ones, 2.1 the float8 ones): read back bit for bit where this PyTorch has the dtype, an
# error naming the tensor, the dtype and the PyTorch release where it does not.
@pytest.mark.parametrize("name, dtype, itemsize", [
    ("U16", "uint16", 2), ("U32", "uint32", 4), ("U64", "uint64", 8),
    ("F8_E4M3", "float8_e4m3fn", 1), ("F8_E5M2", "float8_e5m2", 1)])
def test_newer_dtypes_read_back_bit_for_bit_or_name_the_missing_dtype(tmp_path, name, dtype,
                                                                    itemsize):
    raw = bytes(range(1, 1 + 6 * itemsize))
    text = json.dumps({"t": {"dtype": name, "shape": [2, 3],
                             "data_offsets": [0, len(raw)]}}).encode()
    text += b" " * (-len(text) % 8)
    path = tmp_path / f"{name}.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw)
    want = getattr(torch, dtype, None)
    if want is None:
        with pytest.raises(ut.UmemTorchError, match=rf"tensor 't' .* is {name}, which PyTorch "
                                                    rf"{torch.__version__} has no dtype for"):
            ut.load_safetensors(path)
        return
    got = ut.load_safetensors(path)["t"]
    assert got.dtype == want and got.shape == (2, 3)
    assert bytes(got.contiguous().view(torch.uint8).view(-1).tolist()) == raw
