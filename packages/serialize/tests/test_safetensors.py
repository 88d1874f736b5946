"""The .safetensors format: round trips, PyTorch interchange, hostile files."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from hypothesis import given, settings
from hypothesis import strategies as st
from sadl_serialize import SadlFormatError

SUPPORTED = [n for n in ss.DTYPE_NAMES if n != "complex128"]


def _values(name, shape):
    values = np.arange(int(np.prod(shape))).reshape(shape) - 1
    if name == "bool":
        return values % 2 == 0
    if name.startswith("uint"):
        values = np.abs(values)
    return values.astype(name)


@pytest.mark.parametrize("mmap", [False, True])
def test_round_trip_of_every_supported_dtype_0d_and_empty(tmp_path, mmap):
    obj = {}
    for name in SUPPORTED:
        obj[f"{name}.m"] = _values(name, (2, 3))
        obj[f"{name}.s"] = _values(name, ())
        obj[f"{name}.e"] = _values(name, (0, 2))
    obj["big_endian"] = np.arange(4, dtype=">f4")
    obj["strided"] = np.arange(20, dtype=np.int32).reshape(4, 5)[:, ::2].T
    obj["tensor"] = sadl.tensor(np.ones((2, 2), np.float32))
    path = tmp_path / "w.safetensors"
    sadl.save(obj, path)
    loaded = sadl.load(path, mmap=mmap)
    assert list(loaded) == sorted(obj)  # safetensors keeps no order: keys come back sorted
    for key, value in obj.items():
        expected = value.numpy() if isinstance(value, sadl.Tensor) else value
        got = loaded[key].numpy()
        assert got.dtype == expected.dtype.newbyteorder("="), key
        np.testing.assert_array_equal(got, expected)


def test_single_tensor_metadata_and_unicode_keys(tmp_path):
    path = tmp_path / "s.safetensors"
    sadl.save(sadl.tensor([1.5, 2.5]), path)
    single = sadl.load(path)
    assert isinstance(single, sadl.Tensor)
    np.testing.assert_array_equal(single.numpy(), np.array([1.5, 2.5], np.float32))
    ss.save_safetensors({"größe.λ": np.ones(2)}, path, metadata={"format": "np", "by": "sadl"})
    assert list(sadl.load(path)) == ["größe.λ"]
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        assert f.metadata() == {"format": "np", "by": "sadl"}


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        ({"x": np.zeros(2, np.complex128)}, TypeError, "complex128 is not supported"),
        ({"x": np.array(["a"])}, TypeError, "not supported"),
        ({"x": [1.0]}, TypeError, "expected a Tensor or an array"),
        ({"__single__": np.ones(1)}, ValueError, "reserved"),
        ({2: np.ones(1)}, TypeError, "keys must be strings"),
        (3.0, TypeError, "got float"),
    ],
)
def test_unsupported_objects_are_refused_and_nothing_is_written(tmp_path, obj, error, match):
    path = tmp_path / "x.safetensors"
    with pytest.raises(error, match=match):
        sadl.save(obj, path)
    assert list(tmp_path.iterdir()) == []


def test_torch_reads_what_sadl_writes_and_sadl_reads_what_torch_writes(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is the reference; not installed here")
    from safetensors.torch import load_file, save_file

    ours = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.array([1, -2], np.int64)}
    sadl.save(ours, tmp_path / "ours.safetensors")
    theirs = load_file(str(tmp_path / "ours.safetensors"))
    for key, value in ours.items():
        np.testing.assert_array_equal(theirs[key].numpy(), value)

    layer = torch.nn.Linear(4, 3)
    state = {k: v.detach().contiguous() for k, v in layer.state_dict().items()}
    state["half"] = torch.linspace(-1, 1, 5, dtype=torch.float16)
    state["mask"] = torch.tensor([True, False])
    save_file(state, str(tmp_path / "torch.safetensors"))
    loaded = sadl.load(tmp_path / "torch.safetensors")
    for key, value in state.items():
        np.testing.assert_array_equal(loaded[key].numpy(), value.numpy())
        assert loaded[key].dtype == value.numpy().dtype


def test_bfloat16_from_pytorch_loads_as_float32_exactly(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch is the reference; not installed here")
    from safetensors.torch import save_file

    values = torch.tensor([1.0, -2.5, 3.140625, 1e-3, 65504.0, float("inf")], dtype=torch.bfloat16)
    save_file({"w": values, "other": torch.ones(2)}, str(tmp_path / "bf.safetensors"))
    for mmap in (False, True):
        loaded = sadl.load(tmp_path / "bf.safetensors", mmap=mmap)
        assert loaded["w"].dtype == np.float32
        np.testing.assert_array_equal(loaded["w"].numpy(), values.float().numpy())
    index = ss.read_safetensors_index(tmp_path / "bf.safetensors")
    assert [(i.key, i.dtype, i.shape) for i in index] == [
        ("other", "float32", (2,)),
        ("w", "BF16", (6,)),
    ]


def _st(dtype: str, shape: list[int], offsets: list[int], data: bytes) -> bytes:
    """A hand-made safetensors file with one tensor ``w``."""
    header = {"w": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"", "the header length alone takes 8"),
        (b"garbage!", "does not fit the file"),
        (struct.pack("<Q", 2**40) + b"{}", "does not fit the file"),
        (_st("F32", [4], [0, 16], b""), "not fully covered"),
        (_st("F32", [2], [0, 8], b"\0" * 9), "not fully covered"),
        (_st("XX", [1], [0, 1], b"\0"), "unknown variant `XX`"),
        (_st("F8_E4M3", [1], [0, 1], b"\0"), "NumPy cannot hold"),
        (_st("BOOL", [2], [0, 2], b"\x01\x07"), "other than 0 and 1"),
    ],
)
def test_malformed_safetensors_raise_sadl_format_error(tmp_path, raw, match):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(raw)
    for mmap in (False, True):
        with pytest.raises(SadlFormatError, match=match) as info:
            sadl.load(path, mmap=mmap)
        assert str(info.value).startswith(f"{path}: invalid .safetensors file")


def test_missing_safetensors_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        sadl.load(tmp_path / "missing.safetensors")


@settings(max_examples=max(50, settings.default.max_examples // 10))
@given(st.data())
def test_mutated_safetensors_load_or_raise_sadl_format_error(tmp_path_factory, data):
    base = tmp_path_factory.getbasetemp() / "st-fuzz.safetensors"
    ss.save_safetensors({"a": np.arange(6, dtype=np.float32), "m": np.array([True, False])}, base)
    raw = bytearray(base.read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        choice = data.draw(st.sampled_from(["byte", "cut", "insert"]))
        if choice == "byte":
            raw[at] = data.draw(st.integers(0, 255))
        elif choice == "cut":
            del raw[at:]
        else:
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        if not raw:
            break
    base.write_bytes(bytes(raw))
    for mmap in (False, True):
        try:
            loaded = ss.load_safetensors(base, mmap=mmap)
        except SadlFormatError:
            continue
        assert isinstance(loaded, dict | sadl.Tensor)
