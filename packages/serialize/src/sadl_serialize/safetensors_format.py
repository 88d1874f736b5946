"""``.safetensors`` through the ``safetensors`` package: weights to and from PyTorch / Hugging Face.

The ``safetensors`` library writes and validates the files (header, offsets, bounds); this module
turns sadl objects into NumPy arrays for it and back. Differences from ``.sadl`` worth knowing:

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

from sadl_serialize.atomic import atomic_path
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


def save_safetensors(
    obj: Any, path: str | os.PathLike[str], *, metadata: Mapping[str, str] | None = None
) -> None:
    """Write a Tensor/array or a mapping of str to Tensors/arrays as a ``.safetensors`` file.

    ``metadata`` is the format's optional text-only header (str -> str). CuPy data goes to the
    host; any layout or byte order is accepted. The write is atomic. Raises ``TypeError`` for a
    dtype the format cannot hold (complex128, for one) naming the entry.
    """
    import safetensors
    import safetensors.numpy

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
    arrays: dict[str, np.ndarray[Any, Any]] = {}
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
    for key, value in obj.items():
        # safetensors reads the raw memory: hand it contiguous little-endian host arrays.
        arrays[key] = _host_array(value)
    with atomic_path(path) as tmp:
        try:
            safetensors.numpy.save_file(arrays, tmp, metadata=dict(metadata or {}))
        except safetensors.SafetensorError as exc:
            raise ValueError(f"cannot save {os.fspath(path)} as safetensors: {exc}") from None


def _open_checked(path: str | os.PathLike[str]) -> tuple[list[TensorInfo], int]:
    """Validate the file with the safetensors library; return its index and data start.

    The library parses the header and checks every offset against the file (contiguous, in
    bounds, shape times item size). The header is then parsed here as well, for the byte offsets
    the library does not expose, and cross-checked against what the library reported.
    """
    import safetensors

    name = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {name}")
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
    with open(path, "rb") as fh:
        (length,) = struct.unpack("<Q", fh.read(8))
        raw = fh.read(length)
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise SadlFormatError(name, 8, f"the header is not JSON: {exc}", format=_FORMAT) from None
    if not isinstance(header, dict):
        raise SadlFormatError(name, 8, "the header is not a JSON object", format=_FORMAT)
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
