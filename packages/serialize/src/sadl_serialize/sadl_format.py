"""The ``.sadl`` format, version 1: a writer, and a reader that treats every file as hostile.

Byte layout (DESIGN.md §6; all integers little-endian, no padding)::

    b"SADL" | version u8 = 1 | entry count u32 |
    per entry: key length u32 | key UTF-8 | dtype-name length u8 | dtype name ASCII |
               ndim u8 | ndim x dimension u64 | C-order little-endian raw data

A single tensor is stored as a one-entry mapping under the key ``__single__`` and loads back as a
bare tensor (nested objects are built on this layout by :mod:`sadl_serialize.objects`). Reading
happens in two passes: the whole index (every header field) is parsed and checked against the
bytes that are really there first, and only then is any array allocated, so a lying header can
never make the reader allocate more than the file holds.
"""

from __future__ import annotations

import contextlib
import io
import math
import mmap as _mmap
import os
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import numpy as np
import sadl
from sadl import Device, Tensor
from sadl.backends import is_array, to_device

from sadl_serialize.atomic import atomic_write
from sadl_serialize.errors import SadlFormatError

__all__ = [
    "DTYPE_NAMES",
    "MAGIC",
    "SINGLE_KEY",
    "SUPPORTED_VERSIONS",
    "VERSION",
    "TensorInfo",
    "dumps",
    "load",
    "load_entries",
    "loads",
    "read_index",
    "save",
]

MAGIC = b"SADL"
#: The version this package writes.
VERSION = 1
#: The versions this package reads.
SUPPORTED_VERSIONS = (1,)
#: The key under which a single tensor is stored.
SINGLE_KEY = "__single__"
#: The dtype names a file may contain, exactly as written (NumPy ``dtype.name``); nothing else.
DTYPE_NAMES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
_DTYPES = {name: np.dtype(name).newbyteorder("<") for name in DTYPE_NAMES}
_MAX_NDIM = 64  # NumPy's limit
_MAX_NBYTES = 2**63 - 1  # NumPy's limit on an array's size in bytes
_HEADER = struct.Struct("<4sBI")
_U32 = struct.Struct("<I")
_U8 = struct.Struct("<B")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a file as its header describes it: key, dtype name, shape, size, position.

    ``offset`` is the byte offset of the tensor's data in the file.
    """

    key: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    offset: int

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


# ----------------------------------------------------------------------------------- writing
def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write a Tensor, an array, or a mapping of str to Tensors/arrays to ``path`` (``.sadl``).

    The mapping's order is kept. Arrays are written as C-order little-endian data whatever their
    layout or byte order; CuPy data is copied to the host first. The write is atomic (see
    :func:`sadl_serialize.atomic_write`): a crash mid-save leaves the previous file intact.
    Raises ``TypeError`` for an unsupported object or dtype and ``ValueError`` for a bad key,
    both naming the offending entry, before anything is written.
    """
    items = _prepare(obj)
    with atomic_write(path) as fh:
        _write(fh, items)


def dumps(obj: Any) -> bytes:
    """The ``.sadl`` bytes of ``obj`` (what :func:`save` would write), in memory."""
    items = _prepare(obj)
    buffer = io.BytesIO()
    _write(buffer, items)
    return buffer.getvalue()


def _prepare(obj: Any) -> list[tuple[bytes, Any, str]]:
    """Check every entry before anything is written: (key bytes, value, dtype name) each."""
    if _is_arraylike(obj):
        return [_entry(SINGLE_KEY, obj)]
    if isinstance(obj, Mapping):
        items = []
        for key, value in obj.items():
            if not isinstance(key, str):
                raise TypeError(
                    f"cannot save key {key!r}: keys must be strings, not {type(key).__name__}"
                )
            if key == SINGLE_KEY:
                raise ValueError(
                    f"cannot save a mapping with the key {SINGLE_KEY!r}: it is reserved for a "
                    "single tensor (save the tensor itself instead of a mapping)"
                )
            items.append(_entry(key, value))
        if len(items) > 0xFFFFFFFF:
            raise ValueError(f"cannot save {len(items)} entries: the format allows 2**32 - 1")
        return items
    hint = "; save its state_dict() instead" if callable(getattr(obj, "state_dict", None)) else ""
    raise TypeError(
        "can only save a Tensor, a NumPy/CuPy array, or a mapping of str to those; got "
        f"{type(obj).__name__}{hint}"
    )


def _is_arraylike(value: Any) -> bool:
    return isinstance(value, Tensor | np.generic) or is_array(value)


def _entry(key: str, value: Any) -> tuple[bytes, Any, str]:
    if not _is_arraylike(value):
        raise TypeError(
            f"cannot save entry {_short(key)}: expected a Tensor or an array, got "
            f"{type(value).__name__}"
        )
    try:
        key_bytes = key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"cannot save key {_short(key)}: not valid Unicode ({exc})") from None
    if len(key_bytes) > 0xFFFFFFFF:
        raise ValueError(f"cannot save key {_short(key)}: longer than 2**32 - 1 bytes")
    dtype = np.dtype(value.dtype)
    if dtype.name not in _DTYPES or dtype.fields is not None or dtype.subdtype is not None:
        raise TypeError(
            f"cannot save entry {_short(key)}: dtype {dtype} is not supported by the .sadl "
            f"format (supported: {', '.join(DTYPE_NAMES)}); convert it first, e.g. "
            ".astype(np.float64)"
        )
    return key_bytes, value, dtype.name


def _host_array(value: Any) -> np.ndarray[Any, Any]:
    """The value as a C-contiguous little-endian NumPy array (copied only when needed)."""
    data: np.ndarray[Any, Any] = value.data if isinstance(value, Tensor) else value
    if not isinstance(data, np.ndarray):
        data = np.asarray(to_device(data, "cpu"))  # CuPy -> host; NumPy scalar -> 0-d array
    little = data.dtype.newbyteorder("<")
    if data.dtype != little:
        data = data.astype(little)  # big-endian input: convert the values, never the bytes
    if not data.flags.c_contiguous:
        data = data.copy(order="C")
    if data.dtype == np.bool_ and data.size:
        raw = data.reshape(-1).view(np.uint8)
        if raw.max() > 1:  # a bool view of other bytes: store proper 0/1
            data = (raw != 0).reshape(data.shape)
    return data


def _write(fh: BinaryIO | io.BytesIO, items: list[tuple[bytes, Any, str]]) -> None:
    fh.write(_HEADER.pack(MAGIC, VERSION, len(items)))
    for key_bytes, value, name in items:
        arr = _host_array(value)
        fh.write(
            _U32.pack(len(key_bytes))
            + key_bytes
            + _U8.pack(len(name))
            + name.encode("ascii")
            + struct.pack(f"<B{arr.ndim}Q", arr.ndim, *arr.shape)
        )
        if arr.nbytes:
            fh.write(arr.reshape(-1).view(np.uint8).data)


# ----------------------------------------------------------------------------------- reading
class _Source(Protocol):
    name: str
    size: int

    def read(self, offset: int, n: int) -> bytes: ...

    def readinto(self, offset: int, out: memoryview) -> None: ...


class _BufferSource:
    """Bytes in memory (or a memory map of the file)."""

    def __init__(self, buffer: Any, name: str) -> None:
        self.view = memoryview(buffer).cast("B")
        self.name = name
        self.size = len(self.view)

    def read(self, offset: int, n: int) -> bytes:
        return bytes(self.view[offset : offset + n])

    def readinto(self, offset: int, out: memoryview) -> None:
        out[:] = self.view[offset : offset + len(out)]


class _FileSource:
    """An open file: headers are read field by field, data straight into the arrays."""

    def __init__(self, fh: io.BufferedReader, size: int, name: str) -> None:
        self.fh = fh
        self.size = size
        self.name = name

    def read(self, offset: int, n: int) -> bytes:
        self.fh.seek(offset)
        data = self.fh.read(n)
        if len(data) != n:
            raise self._shrunk(offset + len(data))
        return data

    def readinto(self, offset: int, out: memoryview) -> None:
        self.fh.seek(offset)
        done = 0
        while done < len(out):
            got = self.fh.readinto(out[done:])
            if not got:
                raise self._shrunk(offset + done)
            done += got

    def _shrunk(self, offset: int) -> SadlFormatError:
        return SadlFormatError(
            self.name, offset, "the file ended early (was it changed while being read?)"
        )


class _Cursor:
    """Reads header fields in order, checking each length against the bytes that remain."""

    def __init__(self, source: _Source) -> None:
        self.source = source
        self.pos = 0

    @property
    def left(self) -> int:
        return self.source.size - self.pos

    def error(self, offset: int, reason: str) -> SadlFormatError:
        return SadlFormatError(self.source.name, offset, reason)

    def take(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise self.error(
                self.pos,
                f"{what} needs {n} byte{'s' if n != 1 else ''} but only {self.left} remain "
                "(truncated file?)",
            )
        data = self.source.read(self.pos, n)
        self.pos += n
        return data

    def u8(self, what: str) -> int:
        return int(_U8.unpack(self.take(1, what))[0])

    def u32(self, what: str) -> int:
        return int(_U32.unpack(self.take(4, what))[0])


def _parse_index(source: _Source) -> list[TensorInfo]:
    """Check every header field of the file; no data is read and nothing large is allocated."""
    cur = _Cursor(source)
    if source.size == 0:
        raise cur.error(0, "the file is empty (expected the magic bytes b'SADL')")
    head = cur.source.read(0, min(source.size, 16))
    if not head.startswith(MAGIC):
        raise cur.error(0, f"expected the magic bytes b'SADL', found {head[:4]!r}{_guess(head)}")
    cur.pos = 4
    version = cur.u8("the version byte")
    if version not in SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise cur.error(
            4,
            f"format version {version} is not supported; this reader supports version "
            f"{supported} (a newer sadl-serialize may read it)",
        )
    count = cur.u32("the entry count")
    index: list[TensorInfo] = []
    seen: dict[str, int] = {}
    for i in range(count):
        entry_at = cur.pos
        what = f"entry {i} of {count}"
        key_len = cur.u32(f"the key length of {what}")
        key_at = cur.pos
        key_bytes = cur.take(key_len, f"the key of {what} ({key_len} bytes)")
        try:
            key = key_bytes.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise cur.error(
                key_at + exc.start, f"the key of {what} is not valid UTF-8 ({exc.reason})"
            ) from None
        if key in seen:
            raise cur.error(
                entry_at, f"duplicate key {_short(key)} (entry {i}; also entry {seen[key]})"
            )
        seen[key] = i
        what = f"entry {_short(key)}"
        name_at = cur.pos + 1
        name_bytes = cur.take(cur.u8(f"the dtype-name length of {what}"), f"the dtype of {what}")
        name = name_bytes.decode("ascii", errors="replace")
        if name not in _DTYPES or name.encode("ascii") != name_bytes:
            raise cur.error(
                name_at,
                f"dtype {name_bytes!r} of {what} is not allowed; a .sadl file may only hold "
                f"{', '.join(DTYPE_NAMES)} (exactly so written)",
            )
        dtype = _DTYPES[name]
        ndim_at = cur.pos
        ndim = cur.u8(f"the ndim of {what}")
        if ndim > _MAX_NDIM:
            raise cur.error(
                ndim_at, f"{what} has {ndim} dimensions; at most {_MAX_NDIM} are supported"
            )
        shape = struct.unpack(f"<{ndim}Q", cur.take(8 * ndim, f"the shape of {what}"))
        nonzero = math.prod(d for d in shape if d) * dtype.itemsize
        if nonzero > _MAX_NBYTES:
            raise cur.error(ndim_at + 1, f"the shape {shape} of {what} is impossibly large")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > cur.left:
            raise cur.error(
                cur.pos,
                f"{what} ({name}, shape {shape}) needs {nbytes} data bytes but only {cur.left} "
                "remain (truncated file or corrupt shape)",
            )
        index.append(TensorInfo(key, name, shape, nbytes, cur.pos))
        cur.pos += nbytes
    if cur.left:
        raise cur.error(
            cur.pos, f"{cur.left} unexpected bytes after the last of the {count} declared entries"
        )
    return index


def _guess(head: bytes) -> str:
    """A hint about what a file that is not ``.sadl`` might be instead."""
    if len(head) >= 9 and head[8:9] == b"{":
        return " (this looks like a .safetensors file: use the .safetensors suffix)"
    if head.startswith(b"PK\x03\x04"):
        return " (this is a ZIP archive, such as a PyTorch .pt file or .npz; sadl never unpickles)"
    if head.startswith(b"\x93NUMPY"):
        return " (this is a NumPy .npy file)"
    if head[:1] == b"\x80":
        return " (this looks like a Python pickle; sadl never unpickles)"
    return ""


def _read_arrays(
    source: _Source, index: list[TensorInfo], mapped: Any = None
) -> list[np.ndarray[Any, Any]]:
    """The arrays of a checked index: views of ``mapped`` when given, else fresh copies."""
    arrays = []
    for info in index:
        dtype = _DTYPES[info.dtype]
        if mapped is not None and info.nbytes:
            count = info.nbytes // dtype.itemsize
            arr = np.frombuffer(mapped, dtype=dtype, count=count, offset=info.offset)
            arr = arr.reshape(info.shape)
        else:
            try:
                arr = np.empty(info.shape, dtype=dtype)
            except ValueError as exc:  # a shape NumPy refuses (the index check should catch it)
                raise SadlFormatError(
                    source.name, info.offset, f"entry {_short(info.key)}: {exc}"
                ) from None
            if info.nbytes:
                source.readinto(info.offset, arr.reshape(-1).view(np.uint8).data)
            if sys.byteorder == "big":
                arr = arr.astype(dtype.newbyteorder("="))
        if info.dtype == "bool":
            _check_bool(arr, info, source.name)
        arrays.append(arr)
    return arrays


def _check_bool(arr: np.ndarray[Any, Any], info: TensorInfo, name: str) -> None:
    raw = arr.reshape(-1).view(np.uint8)
    if not raw.size or raw.max() <= 1:
        return
    chunk = 1 << 16
    for start in range(0, raw.size, chunk):
        bad = np.flatnonzero(raw[start : start + chunk] > 1)
        if bad.size:
            at = start + int(bad[0])
            raise SadlFormatError(
                name,
                info.offset + at,
                f"bool entry {_short(info.key)} holds the byte {int(raw[at])} at element {at}; "
                "bool bytes must be 0 or 1",
            )


def read_index(path: str | os.PathLike[str]) -> list[TensorInfo]:
    """Check a ``.sadl`` file's headers and list its tensors without reading their data.

    Raises :class:`SadlFormatError` for a malformed file (bool values are only checked by
    :func:`load`), ``FileNotFoundError`` for a missing one.
    """
    name = os.fspath(path)
    with open(path, "rb") as fh:
        return _parse_index(_FileSource(fh, os.fstat(fh.fileno()).st_size, name))


def load(
    path: str | os.PathLike[str], device: str | Device | None = None, *, mmap: bool = False
) -> Tensor | dict[str, Tensor]:
    """Read a ``.sadl`` file: a bare Tensor for a single tensor, else a dict in file order.

    The file is untrusted input: every malformed byte string raises :class:`SadlFormatError`
    (a ``ValueError``) naming the file and the byte offset, and nothing is allocated before the
    whole header has been checked against the file's size. A missing file raises
    ``FileNotFoundError`` and other OS failures ``OSError``, as ``open`` does.

    ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:N"``) moves the tensors there. With
    ``mmap=True`` the tensors' data are copy-on-write memory maps of the file: nothing is read
    until used, pages are shared with the OS cache, and writes to the arrays stay private (they
    never reach the file). Mapped arrays may be unaligned (the format has no padding); NumPy
    handles that, a little slower.
    """
    return _single(load_entries(path, device, mmap=mmap))


def load_entries(
    path: str | os.PathLike[str], device: str | Device | None = None, *, mmap: bool = False
) -> dict[str, Tensor]:
    """Every entry of a ``.sadl`` file as a dict of Tensors in file order, as stored.

    The same checks and options as :func:`load`, without turning a single tensor or a nested
    object back into what was saved (the layout as py-sadl 2.0.0 reads it).
    """
    if device is not None:
        sadl.device(device)  # reject a bad device before reading anything
    name = os.fspath(path)
    if mmap:
        index, arrays = _load_mapped(path, name)
    else:
        with open(path, "rb") as fh:
            source = _FileSource(fh, os.fstat(fh.fileno()).st_size, name)
            index = _parse_index(source)
            arrays = _read_arrays(source, index)
    return _wrap(index, arrays, device)


def _load_mapped(
    path: str | os.PathLike[str], name: str
) -> tuple[list[TensorInfo], list[np.ndarray[Any, Any]]]:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise SadlFormatError(name, 0, "the file is empty (expected the magic bytes b'SADL')")
        mapped = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_COPY)
    source = _BufferSource(mapped, name)
    try:
        index = _parse_index(source)
        arrays = _read_arrays(source, index, mapped)
    except BaseException:
        source.view.release()
        del source
        with contextlib.suppress(BufferError):  # a view is still alive: the GC will unmap
            mapped.close()
        raise
    source.view.release()
    return index, arrays


def loads(
    data: bytes | bytearray | memoryview, device: str | Device | None = None
) -> Tensor | dict[str, Tensor]:
    """Read ``.sadl`` bytes from memory (what :func:`dumps` returns); same checks as :func:`load`.

    Errors name the file as ``<bytes>``. The arrays are copies: ``data`` can be reused after.
    """
    if device is not None:
        sadl.device(device)
    source = _BufferSource(data, "<bytes>")
    try:
        index = _parse_index(source)
        arrays = _read_arrays(source, index)
    finally:
        source.view.release()
    return _single(_wrap(index, arrays, device))


def _wrap(
    index: list[TensorInfo], arrays: list[np.ndarray[Any, Any]], device: str | Device | None
) -> dict[str, Tensor]:
    return {
        info.key: Tensor(arr, device=device) if device is not None else Tensor(arr)
        for info, arr in zip(index, arrays)
    }


def _single(entries: dict[str, Tensor]) -> Tensor | dict[str, Tensor]:
    """A bare tensor for a file holding only ``__single__``, else the entries."""
    if len(entries) == 1 and SINGLE_KEY in entries:
        return entries[SINGLE_KEY]
    return entries


def _short(key: str, limit: int = 60) -> str:
    """``repr(key)``, shortened: a hostile file may hold a megabyte-long key."""
    text = repr(key)
    return text if len(text) <= limit else text[: limit - 5] + "...'" + f" ({len(key)} chars)"
