"""``.safetensors``: weights to and from PyTorch / Hugging Face.

Files are written here, streamed tensor by tensor into an atomic temporary file (the format is
an 8-byte header length, a JSON header, then the raw data). Reading checks the header here
first (bounded JSON, no repeated names, at most 64 dimensions, each below 2**63) and then lets
the ``safetensors`` library validate offsets and bounds and read the data. Differences from
``.sadl`` worth knowing:

* keys come back sorted by name (the format does not keep insertion order);
* dtypes: bool, (u)int8-64, float16/32/64 and complex64 (no complex128); ``BF16`` tensors from
  PyTorch checkpoints load as float32 (exact: every bfloat16 value is a float32 value); other
  dtypes without a NumPy equivalent (the float8 family) raise :class:`SadlFormatError`;
* a single tensor is stored under ``__single__``, as in ``.sadl``, and loads back bare.
"""

from __future__ import annotations

import json
import mmap as _mmap
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import sadl
from sadl import Device, Tensor

from sadl_serialize.atomic import atomic_write
from sadl_serialize.bounded_json import loads_bounded
from sadl_serialize.errors import SadlFormatError
from sadl_serialize.sadl_format import SINGLE_KEY, TensorInfo, _host_array, _is_arraylike, _short

__all__ = ["load_safetensors", "read_safetensors_index", "save_safetensors"]

# safetensors dtype code -> NumPy dtype name, for every code NumPy can hold.
_TO_NUMPY = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "U16": "uint16",
    "I16": "int16",
    "U32": "uint32",
    "I32": "int32",
    "U64": "uint64",
    "I64": "int64",
    "F16": "float16",
    "F32": "float32",
    "F64": "float64",
    "C64": "complex64",
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}
_FORMAT = ".safetensors"
_MAX_DIMS = 64  # NumPy's limit
_MAX_HEADER = 100_000_000  # the safetensors library's limit


def save_safetensors(
    obj: Any, path: str | os.PathLike[str], *, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a Tensor/array or a mapping of str to Tensors/arrays as a ``.safetensors`` file.

    ``metadata`` is the format's optional text-only header (str -> str). CuPy data goes to the
    host; any layout or byte order is accepted. The write is atomic; a full disk raises
    ``OSError`` naming ``path`` (which keeps its previous content). Raises ``TypeError`` for a
    dtype the format cannot hold (complex128, for one) naming the entry.
    """
    if _is_arraylike(obj):
        obj = {SINGLE_KEY: obj}
    elif not isinstance(obj, Mapping):
        raise TypeError(
            "can only save a Tensor, a NumPy/CuPy array, or a mapping of str to those; got "
            f"{type(obj).__name__}"
        )
    elif SINGLE_KEY in obj:
        raise ValueError(
            f"cannot save a mapping with the key {SINGLE_KEY!r}: it is reserved for a single "
            "tensor (save the tensor itself instead of a mapping)"
        )
    if metadata is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise TypeError("safetensors metadata must map str to str")
    for key, value in obj.items():
        if not isinstance(key, str):
            raise TypeError(f"cannot save key {key!r}: keys must be strings")
        if not _is_arraylike(value):
            raise TypeError(
                f"cannot save entry {_short(key)}: expected a Tensor or an array, got "
                f"{type(value).__name__}"
            )
        dtype = np.dtype(value.dtype)
        if dtype.name not in _FROM_NUMPY or dtype.fields is not None:
            raise TypeError(
                f"cannot save entry {_short(key)} as safetensors: dtype {dtype} is not supported "
                f"(supported: {', '.join(_FROM_NUMPY)}); use the .sadl format or convert it"
            )
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for key in sorted(obj):
        value = obj[key]
        shape = [int(n) for n in value.shape]
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(value.dtype).itemsize
        dtype = _FROM_NUMPY[np.dtype(value.dtype).name]
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the library writes it
    with atomic_write(path) as fh:
        fh.write(struct.pack("<Q", len(text)))
        fh.write(text)
        for key in sorted(obj):
            # raw memory, C order, little-endian, on the host: one tensor at a time
            fh.write(_host_array(obj[key]).reshape(-1).view(np.uint8).data)


def _open_checked(path: str | os.PathLike[str]) -> tuple[list[TensorInfo], int]:
    """Validate the file; return its index and data start.

    The header is checked here first (``_read_header``); then the library parses it and checks
    every offset against the file (contiguous, in bounds, shape times item size), and what it
    reports is cross-checked against the header, whose byte offsets it does not expose.
    """
    import safetensors

    name = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {name}")
    header, length = _read_header(path, name)
    try:
        with safetensors.safe_open(name, framework="numpy") as f:
            names = f.keys()
            seen = {
                k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in names
            }
    except safetensors.SafetensorError as exc:
        raise SadlFormatError(name, None, str(exc), format=_FORMAT) from None
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as exc:  # the library's other complaints (bad UTF-8, ...)
        raise SadlFormatError(name, None, f"{type(exc).__name__}: {exc}", format=_FORMAT) from None
    header.pop("__metadata__", None)
    start = 8 + length
    infos = []
    try:
        for key in sorted(header):
            spec = header[key]
            begin, end = (int(x) for x in spec["data_offsets"])
            dtype = _TO_NUMPY.get(spec["dtype"], spec["dtype"])
            shape = tuple(int(d) for d in spec["shape"])
            if seen.get(key) != (spec["dtype"], shape):
                raise ValueError(f"tensor {_short(key)} is described ambiguously")
            infos.append(TensorInfo(key, dtype, shape, end - begin, start + begin))
    except (KeyError, TypeError, ValueError) as exc:
        raise SadlFormatError(name, 8, f"unexpected header: {exc}", format=_FORMAT) from None
    if len(infos) != len(seen):
        raise SadlFormatError(name, 8, "the header lists duplicate tensor names", format=_FORMAT)
    return infos, start


def _read_header(path: str | os.PathLike[str], name: str) -> tuple[dict[str, Any], int]:
    """The header and its length, checked before any other reader sees it.

    The library would let a repeated name through (the last one wins), and NumPy turns huge or
    too many dimensions into a bare ``ValueError``.
    """

    def bad(offset: int, reason: str) -> SadlFormatError:
        return SadlFormatError(name, offset, reason, format=_FORMAT)

    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise bad(0, f"the file has {len(head)} bytes; the header length alone takes 8")
        (length,) = struct.unpack("<Q", head)
        if length > min(size - 8, _MAX_HEADER):
            raise bad(0, f"the header length {length} does not fit the file ({size} bytes)")
        raw = fh.read(length)
    try:
        header = loads_bounded(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(8, f"the header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise bad(8, "the header is not a JSON object")
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        shape = spec.get("shape") if isinstance(spec, dict) else None
        if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in shape
        ):
            raise bad(8, f"tensor {_short(key)} has no list of integers as its shape")
        if len(shape) > _MAX_DIMS:
            raise bad(8, f"tensor {_short(key)} has {len(shape)} dimensions; at most 64 work")
        if any(not 0 <= n < 2**63 for n in shape):
            raise bad(8, f"the shape {tuple(shape)} of tensor {_short(key)} is impossibly large")
    return header, length


def read_safetensors_index(path: str | os.PathLike[str]) -> list[TensorInfo]:
    """List a ``.safetensors`` file's tensors, sorted by key, after validating the file.

    ``dtype`` is the NumPy name where one exists (``float32``), else the safetensors code
    (``BF16``). Raises :class:`SadlFormatError` for a malformed file.
    """
    return _open_checked(path)[0]


def load_safetensors(
    path: str | os.PathLike[str], device: str | Device | None = None, *, mmap: bool = False
) -> Tensor | dict[str, Tensor]:
    """Read a ``.safetensors`` file: a dict of Tensors sorted by key (bare for ``__single__``).

    Malformed files raise :class:`SadlFormatError` (the safetensors library does not report a
    byte offset, so the message names the tensor instead where it can); a missing file raises
    ``FileNotFoundError``. ``device`` moves the tensors; ``mmap=True`` returns copy-on-write
    memory maps of the file instead of copies (BF16 tensors are converted, so copied).
    """
    import safetensors

    if device is not None:
        sadl.device(device)
    name = os.fspath(path)
    infos, _ = _open_checked(path)
    for info in infos:
        if info.dtype not in _FROM_NUMPY and info.dtype != "BF16":
            raise SadlFormatError(
                name,
                info.offset,
                f"tensor {_short(info.key)} has dtype {info.dtype}, which NumPy cannot hold "
                f"(supported: {', '.join(_TO_NUMPY)}, and BF16, loaded as float32)",
                format=_FORMAT,
            )
    arrays: list[np.ndarray[Any, Any]] = []
    if mmap:
        with open(path, "rb") as fh:
            mapped = _mmap.mmap(fh.fileno(), 0, access=_mmap.ACCESS_COPY)
        arrays = [_from_buffer(mapped, info, info.offset) for info in infos]
    else:
        with safetensors.safe_open(name, framework="numpy") as f, open(path, "rb") as fh:
            for info in infos:
                if info.dtype == "BF16":
                    fh.seek(info.offset)
                    arrays.append(_from_buffer(fh.read(info.nbytes), info, 0))
                else:
                    arrays.append(f.get_tensor(info.key))
    for info, arr in zip(infos, arrays):
        if arr.dtype == np.bool_ and arr.size and arr.reshape(-1).view(np.uint8).max() > 1:
            raise SadlFormatError(
                name,
                info.offset,
                f"bool tensor {_short(info.key)} holds bytes other than 0 and 1",
                format=_FORMAT,
            )
    tensors = {
        info.key: Tensor(arr, device=device) if device is not None else Tensor(arr)
        for info, arr in zip(infos, arrays)
    }
    if len(infos) == 1 and infos[0].key == SINGLE_KEY:
        return tensors[SINGLE_KEY]
    return tensors


def _from_buffer(buffer: Any, info: TensorInfo, offset: int) -> np.ndarray[Any, Any]:
    """The tensor's array read from ``buffer`` at ``offset`` (a view, except for BF16)."""
    if info.dtype == "BF16":  # the top half of a float32: widen exactly
        bits = np.frombuffer(buffer, dtype="<u2", count=info.nbytes // 2, offset=offset)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(info.shape)
    dtype = np.dtype(info.dtype).newbyteorder("<")
    if not info.nbytes:
        return np.empty(info.shape, dtype=dtype)
    count = info.nbytes // dtype.itemsize
    return np.frombuffer(buffer, dtype=dtype, count=count, offset=offset).reshape(info.shape)
