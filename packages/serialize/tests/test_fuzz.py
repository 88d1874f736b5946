"""Hostile files: mutated and truncated .sadl files either load correctly or raise SadlFormatError.

"Correctly" is judged by an independent, deliberately plain reference parser of DESIGN.md §6
written here: whenever it accepts the bytes, ``load`` must return exactly what it read; whenever
it rejects them, ``load`` must raise ``SadlFormatError`` and nothing else. Each load runs under
tracemalloc: it may never allocate more than the file's size (plus a small fixed allowance for
Python objects), whatever the header claims.

Thousands of examples locally, a few hundred in CI (Hypothesis profile chosen in conftest.py).
"""

from __future__ import annotations

import math
import struct
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import sadl_serialize as ss
from hypothesis import event, given, settings
from hypothesis import strategies as st
from sadl_serialize import SadlFormatError

ALLOWED = set(ss.DTYPE_NAMES)
# Python objects (Tensors, dicts, the index, exception text) are not file data.
SLACK = 64 * 1024


def reference_parse(b: bytes):
    """[(key, dtype name, shape, raw bytes)] when ``b`` is a valid file, else None."""
    try:
        if len(b) < 9 or b[:4] != b"SADL" or b[4] != 1:
            return None
        (count,) = struct.unpack_from("<I", b, 5)
        pos = 9
        out = []
        keys = set()
        for _ in range(count):
            (key_len,) = struct.unpack_from("<I", b, pos)
            pos += 4
            if pos + key_len > len(b):
                return None
            key = b[pos : pos + key_len].decode("utf-8")
            pos += key_len
            if key in keys:
                return None
            keys.add(key)
            name_len = b[pos]
            pos += 1
            if pos + name_len > len(b):
                return None
            name = b[pos : pos + name_len].decode("ascii")
            pos += name_len
            if name not in ALLOWED:
                return None
            ndim = b[pos]
            pos += 1
            if ndim > 64:
                return None
            shape = struct.unpack_from(f"<{ndim}Q", b, pos)
            pos += 8 * ndim
            itemsize = np.dtype(name).itemsize
            if math.prod(max(d, 1) for d in shape) * itemsize >= 2**63:
                return None
            nbytes = math.prod(shape) * itemsize
            if pos + nbytes > len(b):
                return None
            raw = b[pos : pos + nbytes]
            pos += nbytes
            if name == "bool" and any(x > 1 for x in raw):
                return None
            out.append((key, name, shape, raw))
        if pos != len(b):
            return None
        return out
    except (UnicodeDecodeError, struct.error, IndexError):
        return None


# ------------------------------------------------------------------------------ strategies
keys = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=8
)
entry_specs = st.lists(
    st.tuples(
        keys,
        st.sampled_from(ss.DTYPE_NAMES),
        st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple),
        st.integers(0, 2**32 - 1),
    ),
    min_size=0,
    max_size=4,
    unique_by=lambda e: e[0],
)


def _array(name: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=math.prod(shape) * np.dtype(name).itemsize, dtype=np.uint8)
    if name == "bool":
        raw = raw % 2
    return raw.view(np.dtype(name).newbyteorder("<")).reshape(shape)


@st.composite
def valid_files(draw):
    specs = draw(entry_specs)
    if specs and draw(st.booleans()) and len(specs) == 1:
        _, name, shape, seed = specs[0]
        return ss.dumps(_array(name, shape, seed))
    return ss.dumps({k: _array(name, shape, seed) for k, name, shape, seed in specs})


INTERESTING = [0, 1, 2, 7, 8, 64, 65, 255, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1]


@st.composite
def mutated_files(draw):
    data = bytearray(draw(valid_files()))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["flip", "byte", "data", "truncate", "insert", "delete", "u32", "u64", "tail"]
            )
        )
        n = len(data)
        at = draw(st.integers(0, max(n - 1, 0)))
        if kind == "flip" and n:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and n:
            data[at] = draw(st.integers(0, 255))
        elif kind == "data" and n:  # the last bytes are usually tensor data: often still valid
            data[n - 1 - draw(st.integers(0, min(n, 16) - 1))] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[draw(st.integers(0, n)) :]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=12))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 12))]
        elif kind in ("u32", "u64"):
            width, fmt = (4, "<I") if kind == "u32" else (8, "<Q")
            value = draw(st.sampled_from(INTERESTING) | st.integers(0, 64))
            value = min(value, 2 ** (8 * width) - 1)
            data[at : at + width] = struct.pack(fmt, value)
        elif kind == "tail":
            data += draw(st.binary(min_size=1, max_size=8))
    return bytes(data)


# ------------------------------------------------------------------------------ checks
@pytest.fixture(scope="module")
def scratch():
    with tempfile.TemporaryDirectory(prefix="sadl-fuzz-") as d:
        yield Path(d) / "f.sadl"


def _load_traced(fn):
    """(result or the exception, peak bytes traced while ``fn`` ran)."""
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        try:
            result = fn()
        except Exception as exc:
            result = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak - base


def _check(data: bytes, scratch: Path) -> None:
    expected = reference_parse(data)
    event("valid" if expected is not None else "invalid")
    scratch.write_bytes(data)
    loaders = {
        "<bytes>": lambda: ss.loads(data),
        "file": lambda: ss.load(scratch),
        "mmap": lambda: ss.load(scratch, mmap=True),
    }
    for how, fn in loaders.items():
        result, peak = _load_traced(fn)
        assert peak <= len(data) + SLACK, f"{how}: {peak} bytes traced for a {len(data)}-byte file"
        if expected is None:
            assert isinstance(result, SadlFormatError), f"{how}: {result!r} instead of an error"
            assert result.offset is not None and 0 <= result.offset <= len(data)
            assert str(result).startswith(f"{'<bytes>' if how == '<bytes>' else scratch}: ")
            continue
        assert not isinstance(result, BaseException), f"{how}: rejected a valid file: {result}"
        if len(expected) == 1 and expected[0][0] == "__single__":
            result = {"__single__": result}
        assert list(result) == [e[0] for e in expected]
        for key, name, shape, raw in expected:
            arr = result[key].numpy()
            assert (arr.dtype.name, arr.shape) == (name, shape)
            assert arr.astype(arr.dtype.newbyteorder("<")).tobytes() == raw


@given(mutated_files())
def test_mutated_files_load_correctly_or_raise_sadl_format_error(scratch, data):
    _check(data, scratch)


# Each example of these two checks many files already: a fifth of the profile's examples.
FEWER = settings(max_examples=max(60, settings.default.max_examples // 5))


@FEWER
@given(valid_files())
def test_valid_files_load_and_every_truncation_raises(scratch, data):
    _check(data, scratch)
    for cut in range(len(data)):
        with pytest.raises(SadlFormatError):
            ss.loads(data[:cut])


@FEWER
@given(st.binary(max_size=64))
def test_random_bytes_raise_sadl_format_error(scratch, data):
    _check(data, scratch)
    _check(b"SADL\x01" + data, scratch)
