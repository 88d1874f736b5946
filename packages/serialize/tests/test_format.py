"""The .sadl format: the byte layout of DESIGN.md §6, round trips, py-sadl 2.0.0 files, errors."""

from __future__ import annotations

import importlib.util
import struct
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import sadl
import sadl_serialize as ss
from sadl_serialize import SadlFormatError

DATA = Path(__file__).parent / "data"
PYSADL = DATA / "pysadl-2.0.0"

EXAMPLE_HEX = (
    "5341444c 01 01000000 0a000000 5f5f73696e676c655f5f 07 666c6f61743634 00 0000000000000c40"
)


def _fixture_module():
    spec = importlib.util.spec_from_file_location(
        "make_pysadl_fixtures", DATA / "make_pysadl_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sample(name: str, shape=(2, 3)) -> np.ndarray:
    values = np.arange(int(np.prod(shape))).reshape(shape) - 2
    if name == "bool":
        return (values % 2 == 0).astype(bool)
    if name.startswith("complex"):
        return (values + 0.5j * values).astype(name)
    if name.startswith("uint"):
        return np.abs(values).astype(name)
    return values.astype(name)


def _entry(key: str, dtype: str, shape: tuple[int, ...], data: bytes) -> bytes:
    key_bytes = key.encode("utf-8")
    return (
        struct.pack("<I", len(key_bytes))
        + key_bytes
        + struct.pack("<B", len(dtype))
        + dtype.encode("ascii")
        + struct.pack(f"<B{len(shape)}Q", len(shape), *shape)
        + data
    )


def _file(*entries: bytes, version: int = 1, count: int | None = None) -> bytes:
    n = len(entries) if count is None else count
    return b"SADL" + struct.pack("<BI", version, n) + b"".join(entries)


# ------------------------------------------------------------------------------ byte layout
def test_the_40_byte_example_of_the_design_is_reproduced_byte_for_byte(tmp_path):
    path = tmp_path / "x.sadl"
    sadl.save(sadl.tensor(3.5, dtype=np.float64), path)
    expected = bytes.fromhex(EXAMPLE_HEX.replace(" ", ""))
    assert len(expected) == 40
    assert path.read_bytes() == expected
    assert ss.dumps(sadl.tensor(3.5, dtype=np.float64)) == expected
    loaded = sadl.load(path)
    assert isinstance(loaded, sadl.Tensor)
    assert loaded.shape == () and loaded.dtype == np.float64 and loaded.item() == 3.5


def test_a_hand_built_mapping_file_loads_in_order(tmp_path):
    raw = _file(
        _entry("b.weight", "float32", (2, 2), struct.pack("<4f", 1, 2, 3, 4)),
        _entry("a", "int16", (3,), struct.pack("<3h", -1, 0, 7)),
        _entry("flag", "bool", (), b"\x01"),
    )
    path = tmp_path / "hand.sadl"
    path.write_bytes(raw)
    loaded = sadl.load(path)
    assert list(loaded) == ["b.weight", "a", "flag"]
    np.testing.assert_array_equal(loaded["b.weight"].numpy(), [[1, 2], [3, 4]])
    assert loaded["b.weight"].dtype == np.float32
    np.testing.assert_array_equal(loaded["a"].numpy(), np.array([-1, 0, 7], np.int16))
    assert loaded["flag"].dtype == np.bool_ and loaded["flag"].item() is True
    assert ss.dumps(loaded) == raw  # and it writes back to the same bytes


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("name", ss.DTYPE_NAMES)
@pytest.mark.parametrize("mmap", [False, True])
def test_every_allowed_dtype_round_trips(tmp_path, name, mmap):
    values = {
        "matrix": _sample(name, (3, 4)),
        "scalar": _sample(name, ()),
        "empty": _sample(name, (0, 5)),
        "zero_in_middle": _sample(name, (2, 0, 3)),
    }
    path = tmp_path / f"{name}.sadl"
    sadl.save(values, path)
    loaded = sadl.load(path, mmap=mmap)
    assert list(loaded) == list(values)
    for key, expected in values.items():
        got = loaded[key].numpy()
        assert got.dtype == expected.dtype, key
        assert got.shape == expected.shape, key
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", [n for n in ss.DTYPE_NAMES if np.dtype(n).itemsize > 1])
def test_big_endian_arrays_are_converted_not_garbled(name):
    little = _sample(name, (2, 3))
    big = little.astype(little.dtype.newbyteorder(">"))
    assert big.dtype.byteorder == ">"
    raw = ss.dumps({"x": big})
    assert raw == ss.dumps({"x": little})  # the file holds little-endian bytes
    np.testing.assert_array_equal(ss.loads(raw)["x"].numpy(), little)


def test_non_contiguous_arrays_are_written_in_c_order():
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    views = {
        "transposed": base.T,
        "strided": base[:, ::2, 1::2],
        "negative": base[::-1],
        "fortran": np.asfortranarray(base),
        "tensor_view": sadl.tensor(base).T,
    }
    loaded = ss.loads(ss.dumps(views))
    for key, view in views.items():
        expected = view.numpy() if isinstance(view, sadl.Tensor) else view
        np.testing.assert_array_equal(loaded[key].numpy(), expected)
        assert loaded[key].numpy().flags.c_contiguous


def test_unicode_keys_and_insertion_order_are_kept():
    keys = ["zeta", "größe", "λ.weight", "🙂", "", "a" * 1000, "日本語/キー", "tab\tand\nnewline"]
    obj = {k: np.full((2,), i, dtype=np.int32) for i, k in enumerate(keys)}
    loaded = ss.loads(ss.dumps(obj))
    assert list(loaded) == keys
    for i, k in enumerate(keys):
        np.testing.assert_array_equal(loaded[k].numpy(), [i, i])


def test_save_accepts_tensors_parameters_arrays_and_numpy_scalars():
    obj = OrderedDict(
        [
            ("param", sadl.Parameter(np.ones((2, 2), np.float32))),
            ("tensor", sadl.tensor([1, 2, 3])),
            ("array", np.zeros(3, np.uint16)),
            ("np_scalar", np.float32(2.5)),
        ]
    )
    loaded = ss.loads(ss.dumps(obj))
    assert loaded["np_scalar"].shape == () and loaded["np_scalar"].dtype == np.float32
    assert not loaded["param"].requires_grad
    bare = ss.loads(ss.dumps(np.arange(3)))
    assert isinstance(bare, sadl.Tensor)


def test_state_dict_of_a_module_round_trips_and_loads_back(tmp_path):
    class Net(sadl.Module):
        def __init__(self):
            self.w = sadl.Parameter(np.arange(6, dtype=np.float32).reshape(2, 3))
            self.b = sadl.Parameter(np.ones(3, np.float32))

    net = Net()
    sadl.save(net.state_dict(), tmp_path / "net.sadl")
    other = Net()
    other.w.data[...] = 0
    other.load_state_dict(sadl.load(tmp_path / "net.sadl"))
    np.testing.assert_array_equal(other.w.numpy(), net.w.numpy())


def test_bool_views_of_other_bytes_are_stored_as_0_and_1():
    weird = np.array([0, 1, 2, 255], dtype=np.uint8).view(np.bool_)
    loaded = ss.loads(ss.dumps({"b": weird}))["b"].numpy()
    np.testing.assert_array_equal(loaded.view(np.uint8), [0, 1, 1, 1])


def test_device_argument_and_bad_device_name(tmp_path):
    path = tmp_path / "d.sadl"
    sadl.save({"x": np.ones(2)}, path)
    assert sadl.load(path, device="cpu")["x"].device == "cpu"
    with pytest.raises(ValueError, match="unknown device"):
        sadl.load(path, device="gpu7")


# ------------------------------------------------------------------------------ py-sadl 2.0.0
def test_files_written_by_py_sadl_2_load_and_our_writer_matches_them_byte_for_byte():
    expected = _fixture_module().expected_objects()
    assert sorted(p.name for p in PYSADL.glob("*.sadl")) == sorted(expected)
    for name, obj in expected.items():
        raw = (PYSADL / name).read_bytes()
        loaded = sadl.load(PYSADL / name)
        if isinstance(obj, np.ndarray):
            assert isinstance(loaded, sadl.Tensor)
            np.testing.assert_array_equal(loaded.numpy(), obj)
            assert loaded.dtype == obj.dtype
        else:
            assert list(loaded) == list(obj)
            for key, value in obj.items():
                assert loaded[key].dtype == value.dtype, (name, key)
                assert loaded[key].shape == value.shape, (name, key)
                np.testing.assert_array_equal(loaded[key].numpy(), value)
        # Same objects, same bytes: py-sadl 2.0.0 reads our files exactly as its own.
        assert ss.dumps(obj) == raw, name


# ------------------------------------------------------------------------------ sadl.save/load
def test_core_dispatches_by_suffix_and_by_magic(tmp_path):
    odd = tmp_path / "weights.bin"
    sadl.save({"x": np.arange(3)}, odd, format="sadl")
    assert odd.read_bytes().startswith(b"SADL")
    np.testing.assert_array_equal(sadl.load(odd)["x"].numpy(), [0, 1, 2])  # by magic bytes
    upper = tmp_path / "W.SADL"
    sadl.save(np.ones(2), upper)
    assert upper.read_bytes().startswith(b"SADL")


def test_unknown_load_options_are_refused(tmp_path):
    path = tmp_path / "o.sadl"
    sadl.save(np.ones(2), path)
    with pytest.raises(TypeError, match="mmpa"):
        sadl.load(path, mmpa=True)


# ------------------------------------------------------------------------------ bad objects
@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        ({"x": np.array(["a"])}, TypeError, r"'x'.*dtype <U1 is not supported"),
        ({"x": np.zeros(2, dtype=np.longdouble)}, TypeError, "not supported"),
        ({"x": np.zeros(2, dtype=[("a", "f4")])}, TypeError, "not supported"),
        ({"x": np.array([1, 2], dtype=object)}, TypeError, "object"),
        ({"x": [1, object()]}, TypeError, r"cannot store x.1 \(object\)"),
        ({"__single__": np.ones(2)}, ValueError, "reserved"),
        ({"__object__": np.ones(2)}, ValueError, "reserved"),
        ({"bad\ud800": np.ones(2)}, ValueError, "not valid Unicode"),
        ([np.ones(2), print], TypeError, r"cannot store 1 \(builtin_function_or_method\)"),
        ({"a": {"x": np.array(["a"])}}, TypeError, r"'a.x'.*dtype <U1 is not supported"),
        (sadl.Module(), TypeError, r"the object \(Function\).*save its state_dict\(\) instead"),
    ],
)
def test_unsupported_objects_are_refused_before_anything_is_written(tmp_path, obj, error, match):
    path = tmp_path / "bad.sadl"
    path.write_bytes(b"previous")
    with pytest.raises(error, match=match):
        sadl.save(obj, path)
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["bad.sadl"]


# ------------------------------------------------------------------------------ bad files
GOOD_ENTRY = _entry("w", "float32", (2,), struct.pack("<2f", 1.0, 2.0))


@pytest.mark.parametrize(
    ("raw", "offset", "match"),
    [
        (b"", 0, "empty"),
        (b"SAD", 0, "magic"),
        (b"NOPE" + b"\x01" + b"\0" * 4, 0, "expected the magic bytes b'SADL', found b'NOPE'"),
        (b"PK\x03\x04" + b"\0" * 20, 0, "ZIP archive"),
        (b"\x80\x04\x95" + b"\0" * 20, 0, "pickle"),
        (struct.pack("<Q", 2) + b"{}" + b"\0" * 4, 0, "safetensors"),
        (b"SADL", 4, "version byte needs 1 byte but only 0 remain"),
        (b"SADL\x02" + b"\0" * 4, 4, "version 2 is not supported; this reader supports version 1"),
        (b"SADL\x00" + b"\0" * 4, 4, "version 0 is not supported"),
        (b"SADL\x01\x01\x00", 5, "entry count needs 4 bytes"),
        (_file(count=1), 9, "key length of entry 0 of 1"),
        (_file(GOOD_ENTRY, count=2), 39, "key length of entry 1 of 2"),
        (_file(GOOD_ENTRY, count=0), 9, "30 unexpected bytes after the last of the 0 declared"),
        (_file(GOOD_ENTRY) + b"\0", 39, "1 unexpected bytes"),
        (_file(struct.pack("<I", 2**32 - 1) + b"abc"), 13, "key of entry 0 of 1 .* needs"),
        (_file(_entry("\xff", "int8", (), b"\0").replace("ÿ".encode(), b"\xff\xfe")), 13, "UTF-8"),
        (_file(_entry("w", "f8", (), b"\0" * 8)), 15, r"dtype b'f8' of entry 'w' is not allowed"),
        (_file(_entry("w", "<f8", (), b"\0" * 8)), 15, "not allowed"),
        (_file(_entry("w", "float", (), b"\0" * 8)), 15, "not allowed"),
        (_file(_entry("w", "Float64", (), b"\0" * 8)), 15, "not allowed"),
        (_file(_entry("w", "object", (), b"\0" * 8)), 15, "not allowed"),
        (_file(_entry("w", "float64 ", (), b"\0" * 8)), 15, "not allowed"),
        (_file(_entry("w", "bfloat16", (), b"\0" * 2)), 15, "not allowed"),
        (_file(_entry("w", "float64", (2,), b"\0" * 8)), 31, "needs 16 data bytes but only 8"),
        (_file(_entry("w", "float64", (2**62, 2**62), b"")), 23, "impossibly large"),
        (_file(_entry("w", "int8", (0, 2**63), b"")), 20, "impossibly large"),
        (_file(_entry("w", "uint8", (2**40,), b"\0" * 8)), 29, "needs 1099511627776 data bytes"),
        (_file(_entry("w", "int8", (1,) * 65, b"\0")), 19, "65 dimensions; at most 64"),
        (_file(_entry("w", "bool", (3,), b"\x00\x01\x02")), 30, "bool .* holds the byte 2"),
        (_file(_entry("w", "bool", (), b"\xff")), 20, "bool bytes must be 0 or 1"),
        (_file(GOOD_ENTRY, GOOD_ENTRY), 39, "duplicate key 'w' \\(entry 1; also entry 0\\)"),
    ],
)
@pytest.mark.parametrize("how", ["file", "mmap", "bytes"])
def test_malformed_files_raise_sadl_format_error_with_file_and_offset(
    tmp_path, raw, offset, match, how
):
    path = tmp_path / "bad.sadl"
    path.write_bytes(raw)
    with pytest.raises(SadlFormatError, match=match) as info:
        if how == "bytes":
            ss.loads(raw)
        else:
            ss.load(path, mmap=how == "mmap")
    err = info.value
    assert isinstance(err, ValueError)
    assert err.offset == offset
    name = "<bytes>" if how == "bytes" else str(path)
    assert err.path == name
    assert str(err).startswith(f"{name}: invalid .sadl file at byte {offset}: ")


def test_the_offset_points_at_the_bad_field():
    raw = _file(GOOD_ENTRY, _entry("bad", "f8", (), b"\0" * 8))
    with pytest.raises(SadlFormatError) as info:
        ss.loads(raw)
    offset = info.value.offset
    assert offset is not None
    assert raw[offset : offset + 2] == b"f8"


def test_a_lying_header_allocates_nothing_large(tmp_path):
    import tracemalloc

    # Claims a 2**40-element float64 tensor (8 TiB) in a 40-byte file.
    raw = _file(_entry("w", "float64", (2**40,), b"\0" * 8))
    path = tmp_path / "liar.sadl"
    path.write_bytes(raw)
    tracemalloc.start()
    try:
        for mmap in (False, True):
            with pytest.raises(SadlFormatError, match="needs 8796093022208 data bytes"):
                ss.load(path, mmap=mmap)
        with pytest.raises(SadlFormatError):
            ss.loads(raw)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_missing_files_and_directories_raise_os_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        ss.load(tmp_path / "missing.sadl")
    with pytest.raises(FileNotFoundError):
        sadl.load(tmp_path / "missing.sadl")
    with pytest.raises(IsADirectoryError):
        ss.load(tmp_path)


def test_format_errors_pickle_and_keep_their_fields():
    import pickle

    err = SadlFormatError("f.sadl", 12, "bad")
    again = pickle.loads(pickle.dumps(err))
    assert (again.path, again.offset, again.reason, str(again)) == (
        "f.sadl",
        12,
        "bad",
        "f.sadl: invalid .sadl file at byte 12: bad",
    )


def test_read_index_lists_entries_without_reading_data(tmp_path):
    path = tmp_path / "i.sadl"
    sadl.save({"a": np.zeros((2, 3), np.float32), "b": np.zeros(0, np.int64)}, path)
    index = ss.read_index(path)
    assert [(i.key, i.dtype, i.shape, i.nbytes, i.size) for i in index] == [
        ("a", "float32", (2, 3), 24, 6),
        ("b", "int64", (0,), 0, 0),
    ]
    raw = path.read_bytes()
    assert raw[index[0].offset : index[0].offset + 24] == bytes(24)
