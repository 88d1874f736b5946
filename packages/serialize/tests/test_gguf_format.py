"""The read-only ``.gguf`` format: ``sadl.load`` dequantizes every tensor to float32 by its GGUF
name, a truncated file or an unsupported tensor type is one SadlFormatError naming the file,
and saving is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sadl
from sadl_serialize import SadlFormatError

gguf = pytest.importorskip("gguf", reason='reading .gguf needs "sadl-serialize[gguf]"')


def _write(path: Path, tensors: dict[str, tuple[np.ndarray, str]]) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (array, kind) in tensors.items():
        qtype = gguf.GGMLQuantizationType[kind]
        if kind in ("F32", "F16"):
            w.add_tensor(name, array.astype(np.float32 if kind == "F32" else np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_load_dequantizes_each_supported_type_as_ggufs_reader(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        k: rng.standard_normal((3, 64)).astype(np.float32)
        for k in ("F32", "F16", "Q8_0", "Q4_0", "Q4_1")
    }
    _write(tmp_path / "m.gguf", {f"t.{k}": (a, k) for k, a in arrays.items()})
    loaded = sadl.load(str(tmp_path / "m.gguf"))
    assert sorted(loaded) == sorted(f"t.{k}" for k in arrays)
    for kind, array in arrays.items():
        got = loaded[f"t.{kind}"]
        assert isinstance(got, sadl.Tensor) and got.dtype == np.float32 and got.shape == (3, 64)
        if kind in ("F32", "F16"):
            want = array.astype(np.float16).astype(np.float32) if kind == "F16" else array
        else:
            qtype = gguf.GGMLQuantizationType[kind]
            want = gguf.quants.dequantize(gguf.quants.quantize(array, qtype), qtype)
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(NotImplementedError, match="cannot write .gguf"):
        sadl.save(loaded, str(tmp_path / "out.gguf"))


def test_truncated_file_and_unsupported_type_name_the_file(tmp_path):
    path = tmp_path / "m.gguf"
    _write(path, {"a": (np.ones((2, 32), np.float32), "Q8_0"), "b": (np.ones((2, 32)), "Q5_0")})
    with pytest.raises(SadlFormatError, match=r"m\.gguf.*tensor 'b' has the unsupported type Q5_0"):
        sadl.load(str(path))
    _write(path, {"a": (np.ones((4, 64), np.float32), "F32")})
    data = path.read_bytes()
    path.write_bytes(data[:-16])
    with pytest.raises(SadlFormatError, match=r"m\.gguf: invalid \.gguf file"):
        sadl.load(str(path))
    path.write_bytes(b"GGUX" + data[4:])
    with pytest.raises(SadlFormatError, match="expected the magic"):
        from sadl_serialize.gguf_format import read_gguf

        read_gguf(path)
